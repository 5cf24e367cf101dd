/* Process start-up shared by both binaries (STYLE #23, curl's main_checkfds, git's
 * sanitize_stdfds). */
#ifndef MU_PROC_H
#define MU_PROC_H

/* Makes sure fds 0, 1 and 2 are open (on /dev/null when they are not), so that the first file
 * or socket the program opens never becomes its stdout; ignores SIGPIPE (a closed peer is an
 * EPIPE from write, not a death); and routes libuv and cJSON through the one allocator. Call
 * first thing in main(). */
void mu_proc_startup(void);

/* Installs fn as the handler of each signal of the 0-terminated list (sigaction, no flags, no
 * mask): for handlers that only set a flag or write to a pipe. */
void mu_proc_catch(void (*fn)(int), const int *signals);

/* The start time of process `pid` (field 22 of /proc/PID/stat, in clock ticks since boot):
 * with the pid, it names one process for good, as a pid alone is reused.
 * Returns: the start time, or 0 when there is no such process (or no /proc). */
unsigned long long mu_proc_start_time(long pid);

/* Whether `pid` is still the process that had start time `start` (recorded when it was
 * started): 0 when pid <= 1, start is 0, or the process is gone or another. */
int mu_proc_is(long pid, unsigned long long start);

#endif
