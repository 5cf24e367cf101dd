/* An intrusive chained hash table keyed by byte strings, hashed with 32-bit FNV-1a: the
 * element embeds a `struct mu_hnode` that holds the key's pointer, length and hash, so a
 * lookup hashes once, compares in place and allocates nothing. The table never copies or
 * frees keys or elements: an element owns its key (or points it at its own bytes).
 *
 *   struct user { struct mu_hnode hn; char name[]; };
 *   struct mu_htab users;
 *   mu_htab_init(&users, 0);                          (0: buckets made at the first add)
 *   mu_htab_add(&users, &u->hn, u->name, strlen(u->name));
 *   struct mu_hnode *x = mu_htab_find(&users, "ann", 3);
 *   struct user *u = x ? MU_CONTAINER_OF(x, struct user, hn) : NULL;
 *   mu_htab_del(&users, &u->hn);
 *
 * The bucket count is a power of two and doubles when the table holds as many elements as it
 * has buckets. Keys are not checked for duplicates (find first when that matters). Iteration
 * (mu_htab_next()) walks bucket by bucket: an order that depends only on the sequence of adds
 * and deletes, so two tables built the same way iterate the same way.
 */
#ifndef MU_HTAB_H
#define MU_HTAB_H

#include <stddef.h>
#include <stdint.h>

#include "list.h"

struct mu_hnode {
  struct mu_hnode *next; /* chain */
  char *key;             /* borrowed from the element; need not be NUL-terminated */
  uint32_t len;
  uint32_t hash;
};

struct mu_htab {
  struct mu_hnode **b;
  size_t nb; /* buckets: 0 before the first add, else a power of two */
  size_t n;  /* elements */
  size_t first_nb;
};

/* Returns: the 32-bit FNV-1a hash of n bytes at p. */
uint32_t mu_fnv1a(const void *p, size_t n);

/* Makes an empty table; `buckets` (a power of two, or 0 for 16) is allocated now when given,
 * else at the first add (so a table that stays empty costs nothing). */
void mu_htab_init(struct mu_htab *t, size_t buckets);

/* Frees the bucket array; the elements are the caller's (free them first, e.g. with
 * mu_htab_clear()). The table is empty afterwards. Accepts NULL. */
void mu_htab_release(struct mu_htab *t);

/* Returns: the element whose key is the `len` bytes at `key`, or NULL. */
struct mu_hnode *mu_htab_find(const struct mu_htab *t, const char *key, size_t len);

/* Adds `e` under the `len` bytes at `key` (kept as a pointer: they must live as long as the
 * element is in the table). Ownership: borrows `e` and `key` until mu_htab_del(). */
void mu_htab_add(struct mu_htab *t, struct mu_hnode *e, char *key, size_t len);

/* Removes `e` (a no-op when it is not in the table). */
void mu_htab_del(struct mu_htab *t, struct mu_hnode *e);

/* Returns: the element after `prev` in iteration order (the first when `prev` is NULL), or
 * NULL at the end. Adding or deleting during a walk invalidates it. */
struct mu_hnode *mu_htab_next(const struct mu_htab *t, const struct mu_hnode *prev);

typedef void mu_hnode_free_fn(struct mu_hnode *e, void *data);

/* Empties the table, calling `fn(e, data)` on every element in iteration order once it is out
 * of the table (so `fn` may free it). The buckets stay allocated. */
void mu_htab_clear(struct mu_htab *t, mu_hnode_free_fn *fn, void *data);

#endif
