/* fuzz_units.c: the quantity parser. Oracle: an accepted quantity is a finite number (the
 * formulas divide by and multiply with it), and a refused one comes with a message. The first
 * byte picks the unit kind; the rest is the text. */
#include "fuzz_common.h"
#include "../../loader/scn.h"

#include <math.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    scn_unit_kind kind = (scn_unit_kind)(data[0] % (SCN_UNIT_FRACTION + 1));
    char *text = fuzz_text(data + 1, size - 1);
    double v = NAN;
    char msg[512] = "";
    int rc = scn_quantity_parse(text, kind, &v, msg, sizeof msg);
    if (rc == 0 && !isfinite(v)) abort();
    if (rc != 0 && !msg[0]) abort();
    free(text);
    return 0;
}
