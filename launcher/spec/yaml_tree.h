/* YAML in and out for manifests: a cJSON tree is written as block-style YAML (what `muster run
 * -s kubernetes --dryrun` prints and `kubectl create -f -` reads), and YAML text is read back into
 * a cJSON tree (for golden comparisons and recorded fixtures).
 *
 * The emitter quotes every scalar that a YAML 1.1 or 1.2 reader could take for anything other
 * than the same string ("0", "true", "no", "", "1e3", "a: b", ...), so a reader gets back
 * exactly the tree that was written.
 */
#ifndef MU_YAML_TREE_H
#define MU_YAML_TREE_H

#include <cjson/cJSON.h>

#include "buf.h"

/* Writes node (an object, usually) as a YAML document without the "---" header.
 * Returns: 0, or MU_E2BIG when out's cap is reached. Ownership: appends to out. */
int mu_yaml_emit(const cJSON *node, struct mu_buf *out);

/* Parses the first document of text. Plain scalars become numbers, booleans and null where
 * YAML 1.1 says so; quoted scalars stay strings.
 * Returns: 0, or MU_EPARSE with the line and libyaml's message in err.
 * Ownership: *out is the caller's (cJSON_Delete). */
int mu_yaml_parse(const char *text, size_t len, cJSON **out, struct mu_buf *err);

#endif
