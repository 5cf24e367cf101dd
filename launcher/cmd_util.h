/* Helpers shared by the cmd_*.c files (CLI layer: these print errors with mu_error()). */
#ifndef MU_CMD_UTIL_H
#define MU_CMD_UTIL_H

#include "config.h"
#include "sched.h"

/* Resolves "SCHED://SESSION/APP_ID[/ROLE[/REPLICA]]" (or a bare APP_ID on the default
 * scheduler). *rest gets what follows the app id ("role/0") or NULL.
 * Returns: 0, or an exit code (2) after printing the error. Ownership: *app_id and *rest are
 * the caller's (mu_free). */
int mu_cli_handle(const char *arg, const struct mu_sched_ops **s, char **app_id, char **rest);

/* Finds a scheduler by name, printing an error with the closest name when unknown.
 * Returns: the backend, or NULL. */
const struct mu_sched_ops *mu_cli_sched(const char *name);

/* Loads the config files and resolves the scheduler's cfg with the -cfg string (may be NULL).
 * file may be NULL (then it is loaded and released here). Returns: 0, or 2 after printing. */
int mu_cli_cfg(const struct mu_sched_ops *s, const char *cfgstr, const struct mu_config *file,
               struct mu_cfg *out);

/* Prints a status in TorchX's text form, or as JSON. */
void mu_cli_status_print(const struct mu_app_status *st, const char *handle, int json);

#endif
