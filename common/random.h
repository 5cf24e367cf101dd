/* Random bytes from the kernel (uv_random(), getrandom(2) underneath), for what must not be
 * guessed: job tokens, app-id suffixes. There is no weaker fallback: a caller that cannot get
 * randomness fails and says so.
 */
#ifndef MU_COMMON_RANDOM_H
#define MU_COMMON_RANDOM_H

#include <stddef.h>

/* Fills buf with n random bytes. Blocks only while the kernel's pool is not yet seeded (early
 * boot). Returns: 0, or a negative MU_E* / -errno code when the kernel would not give them. */
int mu_random_bytes(void *buf, size_t n);

/* Writes nbytes random bytes as 2 * nbytes lowercase hex digits and a NUL to out, which must
 * hold 2 * nbytes + 1 chars (a 256-bit token: nbytes 32, out[65]).
 * Returns: 0, or an error as mu_random_bytes(). On error out is the empty string. */
int mu_random_hex(char *out, size_t nbytes);

/* The random part of an app id (TorchX's make_unique): a lowercase letter, then 11 of [a-z0-9];
 * or, when $MUSTER_APP_ID_SUFFIX is set and not empty (tests pin it), its letters and digits
 * lowercased, at most 12 ("0" when it has none). Writes it, NUL-terminated, into out.
 * Returns: 0, or an error as mu_random_bytes() (out is then ""). */
int mu_app_id_suffix(char out[13]);

/* Writes a new 256-bit token (64 hex digits and a newline) to a file at `path` that only its
 * owner may read (0600, created anew: an existing file is an error), for a job's rendezvous
 * (docs/security.md). The token is wiped from memory; only the file holds it.
 * Returns: 0, or a negative MU_E* / -errno code (-EEXIST when the file exists). */
int mu_random_token_file(const char *path);

#endif
