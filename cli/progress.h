/* progress.h: a progress bar with an ETA on stderr, drawn only when stderr is a terminal. */
#ifndef KVPLAN_PROGRESS_H
#define KVPLAN_PROGRESS_H

typedef struct {
    const char *label;
    int tty;
    double t0, last;
} cli_progress;

void cli_progress_init(cli_progress *p, const char *label);
/* Redraws at most ten times a second; total <= 0 means unknown. */
void cli_progress_update(cli_progress *p, long done, long total);
void cli_progress_end(cli_progress *p);
/* cli_progress_update with the bar as an opaque pointer: the progress callback libraries take. */
void cli_progress_cb(void *bar, long done, long total);

#endif
