/* JSON helpers shared by musterd and the launcher: Go-compatible string escaping for the
 * hand-written encoders, and small cJSON getters for the readers. Library code: never prints.
 */
#ifndef MU_JSON_H
#define MU_JSON_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "buf.h"

/* Appends `n` bytes of `s` as a quoted JSON string, escaped as Go's encoding/json does
 * (controls, '"', '\\', and \u003c \u003e \u0026 for < > &, \u2028 and \u2029).
 * Ownership: borrows s. Errors: over b's cap nothing is appended (check b's cap first). */
void mu_json_str(struct mu_buf *b, const char *s, size_t n);

/* The length mu_json_str() would append for `s`, quotes included, without writing it: what an
 * answer will take, known before it is rendered. */
size_t mu_json_str_len(const char *s, size_t n);

/* Appends an expiration as a quoted RFC3339Nano time (Go's, trailing zeros of the fraction
 * trimmed): "2026-12-01T08:44:17.5Z". */
void mu_json_time(struct mu_buf *b, int64_t unix_ns);

/* Returns: the string member `key` of object `o`, or NULL when absent or not a string.
 * Ownership: borrowed from `o`. */
const char *mu_json_get_str(const cJSON *o, const char *key);

/* Returns: the number member `key` of `o` as a long, or `dflt` when absent or not a number. */
long mu_json_get_long(const cJSON *o, const char *key, long dflt);

/* Returns: the number member `key` of `o`, or `dflt` when absent or not a number. */
double mu_json_get_double(const cJSON *o, const char *key, double dflt);

/* Returns: 1 or 0 for a boolean member `key` of `o`, or `dflt` when absent or not a bool. */
int mu_json_get_bool(const cJSON *o, const char *key, int dflt);

#endif
