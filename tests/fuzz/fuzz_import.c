/* fuzz_import.c: both importers (vLLM benchmark JSON, Prometheus text), chosen by content as
 * `kvplan import` chooses. Oracle: an accepted file yields only finite, non-negative metrics,
 * at most DB_IMPORT_MAX of them, and a refused one a message. */
#include "fuzz_common.h"
#include "../../db/db_import.h"

#include <math.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = fuzz_text(data, size);
    static db_import im;
    char err[1024] = "";
    int rc = db_import_text(text, "fuzz", &im, err, sizeof err);
    if (rc == 0) {
        if (im.n < 0 || im.n > DB_IMPORT_MAX || !im.format) abort();
        for (int i = 0; i < im.n; i++)
            if (!isfinite(im.m[i].value) || im.m[i].value < 0 || !im.m[i].name) abort();
    } else if (!err[0]) {
        abort();
    }
    free(text);
    return 0;
}
