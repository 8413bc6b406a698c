/* interrupt.c — SIGINT and SIGTERM for the check commands (see interrupt.h). */
#include "cli/interrupt.h"

#include <string.h>
#include <unistd.h>

static volatile sig_atomic_t stop_flag;

volatile sig_atomic_t *kvv_interrupt_flag(void)
{
    return &stop_flag;
}

/* First signal: set the flag and say what happens next (write(2) is
 * async-signal-safe, stdio is not). Second: the default action, now. */
static void on_signal(int sig)
{
    if (stop_flag) {
        signal(sig, SIG_DFL);
        raise(sig); /* delivered when the handler returns */
        return;
    }
    stop_flag = 1;
    static const char msg[] = "\nkvverify: interrupted: stopping; the reports will hold what "
                              "finished (send it again to stop at once, without reports)\n";
    ssize_t w = write(2, msg, sizeof msg - 1);
    (void)w;
}

/* What the command had before catching, restored on release. */
static struct sigaction old_int, old_term;
static bool catching;

void kvv_interrupt_catch(void)
{
    if (catching)
        return;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int); /* no SA_RESTART: a waiting poll returns */
    sigaction(SIGTERM, &sa, &old_term);
    catching = true;
}

void kvv_interrupt_release(void)
{
    if (!catching)
        return;
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    catching = false;
}
