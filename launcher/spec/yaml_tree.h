/* YAML in and out: a cJSON tree is written as block-style YAML (what `muster run -s kubernetes
 * --dryrun` prints and `kubectl create -f -` reads), and YAML text is read into a cJSON tree
 * (components, golden comparisons and recorded fixtures).
 *
 * The emitter is the one quoting of strings for YAML's syntax, keys and values alike: every
 * scalar that a YAML 1.1 or 1.2 reader could take for anything other than the same string
 * ("0", "true", "no", "~", "", "1e3", "._1", "a: b", " lead", ...) is quoted, and every
 * character a reader would fold or refuse (line breaks, including U+0085, U+2028 and U+2029
 * that YAML 1.1 folds, C0 and C1 controls, tabs, the byte-order mark) is written as an escape,
 * so a reader gets back exactly the tree that was written (tests: k8s__yaml_* and
 * tests/cli/t2011-k8s-yaml-roundtrip.sh, through PyYAML, libyaml and the validator's parser).
 */
#ifndef MU_YAML_TREE_H
#define MU_YAML_TREE_H

#include <cjson/cJSON.h>

#include "buf.h"

/* Writes node (an object, usually) as a YAML document without the "---" header.
 * Returns: 0; MU_EINVAL when a string is not valid UTF-8 (YAML carries Unicode text only: check
 * with mu_yaml_invalid() first to name it); MU_E2BIG when out's cap is reached.
 * Ownership: appends to out. */
int mu_yaml_emit(const cJSON *node, struct mu_buf *out);

/* The first key or string value in node's tree that is not valid UTF-8, which no YAML document
 * can carry. Returns: that string, or NULL when every one is valid. Ownership: borrowed from
 * node. */
const char *mu_yaml_invalid(const cJSON *node);

enum mu_yaml_flags {
  MU_YAML_STRINGS = 1 << 0, /* every scalar stays a string (the reader knows the types) */
  MU_YAML_MAPPING = 1 << 1, /* the document must be a mapping */
};

/* Reads the first document of text into a tree. Plain scalars become numbers, booleans and null
 * where YAML 1.1 says so, unless MU_YAML_STRINGS; quoted scalars stay strings.
 * Returns: 0; MU_EPARSE for a syntax error, with its line in *line and libyaml's words in err;
 * MU_ENOENT for no document (or, with MU_YAML_MAPPING, one that is not a mapping); MU_EINVAL
 * for what a JSON tree cannot hold (a key that is not a scalar, nesting over 64); MU_E2BIG,
 * with the reason in err, when aliases would expand the document past 64 Ki nodes or 4 MiB of
 * scalars beyond what it spells out (nested aliases: "billion laughs"), found before the
 * memory is spent.
 * Ownership: *out is the caller's (cJSON_Delete). */
int mu_yaml_read(const char *text, size_t len, unsigned flags, cJSON **out, size_t *line,
                 struct mu_buf *err);

/* Parses the first document of text. Plain scalars become numbers, booleans and null where
 * YAML 1.1 says so; quoted scalars stay strings.
 * Returns: 0, or MU_EPARSE with the line and libyaml's message (or what is wrong) in err.
 * Ownership: *out is the caller's (cJSON_Delete). */
int mu_yaml_parse(const char *text, size_t len, cJSON **out, struct mu_buf *err);

#endif
