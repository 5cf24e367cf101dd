/* Components: YAML files that turn command-line arguments into a job spec (struct mu_app).
 * The format is documented in docs/components.md; in short:
 *
 *   name: utils.echo
 *   description: ...
 *   params:                       # typed parameters: str, int, bool, list, map, jobsize
 *     - {name: msg, type: str, default: hello world, help: the message}
 *   checks:                       # optional: exactly_one / at_most_one of some params
 *     - {exactly_one: [script, m], message: ...}
 *   app:                          # the template: ${param} references, conditionals, splicing
 *     name: echo
 *     roles:
 *       - {name: echo, entrypoint: echo, args: ["${msg}"]}
 *
 * Component names resolve to files: a name with '/' or ending in .yaml/.yml is a path;
 * otherwise <dir>/<name>.yaml in $MUSTER_COMPONENTS_PATH (':'-separated), then the builtin
 * directory. FILE.py:FUNCTION is a TorchX Python component (component_py.c: the function runs
 * under python3 with muster's TorchX shim; its parameters and AppDef come back as the same
 * model). Library code: nothing printed; errors come back in `err`.
 */
#ifndef MU_COMPONENT_H
#define MU_COMPONENT_H

#include "buf.h"
#include "config.h"
#include "job.h"
#include "strvec.h"

struct mu_component;

/* Finds and parses a component. Returns: 0; MU_ENOENT for an unknown name (err suggests the
 * closest builtin); MU_EPARSE / MU_EINVAL for a malformed file (err names file and key).
 * Ownership: *out is the caller's (mu_component_free). */
int mu_component_load(const char *name, struct mu_component **out, struct mu_buf *err);
/* Parses YAML text directly (tests). `where` names the source in messages.
 * Returns: 0, or MU_EPARSE / MU_EINVAL as mu_component_load. Ownership: borrows text; *out is
 * the caller's (mu_component_free). */
int mu_component_parse(const char *text, size_t len, const char *where, struct mu_component **out,
                       struct mu_buf *err);
/* Accepts NULL. */
void mu_component_free(struct mu_component *c);

/* Returns: the component's name / one-paragraph description. Ownership: borrowed. */
const char *mu_component_name(const struct mu_component *c);
const char *mu_component_description(const struct mu_component *c);
/* text into out wrapped at spaces to at most width columns (a longer word stays whole), its own
 * line breaks kept, every line after the first starting with indent spaces, and a line break
 * at the end. (A description's trailing spaces and those before a break are dropped.) */
void mu_component_wrap(struct mu_buf *out, const char *text, size_t width, size_t indent);

/* Appends the component's source: its file as it is (YAML, or the Python file).
 * Returns: 0, or a negative MU_E* code with the reason in err. */
int mu_component_source(const struct mu_component *c, struct mu_buf *out, struct mu_buf *err);

/* Writes `muster run NAME --help` (usage, description, one line per parameter). */
void mu_component_help(const struct mu_component *c, struct mu_buf *out);

/* Parses the component's arguments (argv[0] is the first argument, not the name), applies
 * `[component:<name>]` defaults from cfg (may be NULL), runs the checks and evaluates the
 * template into an app. Returns: 0; MU_EINVAL with the message in err for an unknown,
 * repeated, mistyped or missing argument (the message names it and suggests the closest).
 * Ownership: *out is the caller's (mu_app_free). */
int mu_component_build(const struct mu_component *c, int argc, char **argv,
                       const struct mu_config *cfg, struct mu_app **out, struct mu_buf *err);

/* Lists the builtin component names (sorted), with the description of each in descs when not
 * NULL. Returns: 0. Ownership: appends copies. */
int mu_component_builtins(struct mu_strvec *names, struct mu_strvec *descs);

/* Parses TorchX's -j form: "P", "NxP", "MIN:MAXxP". Returns: 0, or MU_EINVAL. */
int mu_parse_jobsize(const char *s, long *min_nodes, long *max_nodes, long *nproc);

#endif
