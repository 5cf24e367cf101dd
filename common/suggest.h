/* "Did you mean ...?": the closest of a set of known words to one that was not found.
 *
 *   struct mu_suggest s;
 *   mu_suggest_init(&s, key);
 *   for (each known word w) mu_suggest_add(&s, w);
 *   const char *best = mu_suggest_best(&s);   (NULL: nothing close enough)
 *
 * One rule for every caller, TorchX's (difflib's get_close_matches): a candidate is close when
 * twice the length of its longest common subsequence with the unknown word, over their two
 * lengths, is at least 0.6 ("KK" -> "K", "qeue" -> "queue"; "msg" is not close to "cfg"), and
 * the closest wins (the first added on a tie).
 */
#ifndef MU_SUGGEST_H
#define MU_SUGGEST_H

#include <stddef.h>

struct mu_suggest {
  const char *word; /* the unknown word */
  size_t word_len;  /* compared up to the first '=' (a "--key=value" argument) */
  const char *best;
  int best_score; /* the best similarity so far, in thousandths */
};

/* Starts a search for words near `word` (compared up to its first '=').
 * Ownership: borrows `word` until the last call on s. */
void mu_suggest_init(struct mu_suggest *s, const char *word);

/* Considers `candidate` (NULL is ignored). Ownership: borrows it until mu_suggest_best(). */
void mu_suggest_add(struct mu_suggest *s, const char *candidate);

/* Returns: the closest candidate, or NULL when none is close. Ownership: a candidate's
 * pointer as it was added. */
const char *mu_suggest_best(const struct mu_suggest *s);

/* Returns: the Levenshtein distance between a and b, or 99 when either is over 64 bytes. */
int mu_edit_distance(const char *a, const char *b);

#endif
