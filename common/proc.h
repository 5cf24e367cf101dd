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

#endif
