/* scn_locate.c: a field's position in a scenario file (scn_locate.h). The file is parsed again
 * with the loader's own parser, so positions match the loader's errors. */
#include "scn_locate.h"
#include "scn.h"
#include "scn_tree.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

bool scn_locate(const char *file, const char *path, int *line, int *col)
{
    scn_doc *d = scn_doc_init();
    if (!d) return false;
    scn_error e;
    memset(&e, 0, sizeof e);
    const scn_node *n = scn_doc_parse_file(d, file, &e), *found = NULL;
    char key[256];
    const char *p = path;
    while (n && n->kind == SCN_NODE_MAP && *p) {
        size_t k = strcspn(p, ".");
        if (k == 0 || k >= sizeof key) break;
        memcpy(key, p, k);
        key[k] = '\0';
        const scn_node *v = scn_map_get(n, key);
        if (!v) break;
        found = n = v;
        p += k + (p[k] == '.');
    }
    bool ok = found != NULL;
    if (ok) { *line = found->line; *col = found->col; }
    scn_doc_free(d);
    return ok;
}

void scn_locate_message(const char *file, const char *msg, char *out, size_t n)
{
    /* A leading field path: lower-case words, digits and underscores joined by dots. */
    size_t k = 0;
    while (msg[k] && (islower((unsigned char)msg[k]) || isdigit((unsigned char)msg[k]) || msg[k] == '_' || msg[k] == '.')) k++;
    int line = 0, col = 0;
    char path[256];
    if (k > 0 && k < sizeof path && msg[k] == ':' && msg[k + 1] == ' ') {
        memcpy(path, msg, k);
        path[k] = '\0';
        if (scn_locate(file, path, &line, &col)) {
            snprintf(out, n, "%s:%d:%d: %s", file, line, col, msg);
            return;
        }
    }
    snprintf(out, n, "%s: %s", file, msg);
}
