/* progress.c: see progress.h. */
#include "progress.h"
#include "../backend/be.h"

#include <stdio.h>
#include <unistd.h>


void cli_progress_init(cli_progress *p, const char *label)
{
    p->label = label;
    p->tty = isatty(2);
    p->t0 = p->last = be_now();
}

void cli_progress_update(cli_progress *p, long done, long total)
{
    if (!p->tty) return;
    double t = be_now();
    if (t - p->last < 0.1 && done < total) return;
    p->last = t;
    if (total > 0) {
        double f = done > total ? 1 : (double)done / (double)total;
        int w = (int)(f * 30);
        double eta = f > 0 ? (t - p->t0) * (1 - f) / f : 0;
        fprintf(stderr, "\r%s [%.*s%*s] %3.0f%% %ld/%ld  ETA %.0fs ", p->label, w, "##############################",
                30 - w, "", f * 100, done, total, eta);
    } else {
        fprintf(stderr, "\r%s %ld  %.0fs ", p->label, done, t - p->t0);
    }
    fflush(stderr);
}

void cli_progress_end(cli_progress *p)
{
    if (p->tty) fprintf(stderr, "\r%*s\r", 79, "");
}

void cli_progress_cb(void *bar, long done, long total) { cli_progress_update(bar, done, total); }
