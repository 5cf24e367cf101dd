/* "Did you mean" (see suggest.h). */
#include "suggest.h"

#include <string.h>

int mu_edit_distance(const char *a, const char *b)
{
  size_t la = strlen(a), lb = strlen(b);
  if (la > 64 || lb > 64)
    return 99;
  int row[65];
  for (size_t j = 0; j <= lb; j++)
    row[j] = (int)j;
  for (size_t i = 1; i <= la; i++) {
    int prev = row[0];
    row[0] = (int)i;
    for (size_t j = 1; j <= lb; j++) {
      int cur = row[j];
      int cost = a[i - 1] == b[j - 1] ? 0 : 1;
      int best = prev + cost;
      if (row[j] + 1 < best)
        best = row[j] + 1;
      if (row[j - 1] + 1 < best)
        best = row[j - 1] + 1;
      row[j] = best;
      prev = cur;
    }
  }
  return row[lb];
}

/* Length of the longest common subsequence of a and b (each at most 64 bytes). */
static int lcs(const char *a, size_t la, const char *b, size_t lb)
{
  int row[65] = {0};
  for (size_t i = 1; i <= la; i++) {
    int diag = 0;
    for (size_t j = 1; j <= lb; j++) {
      int up = row[j];
      row[j] = a[i - 1] == b[j - 1] ? diag + 1 : (row[j] > row[j - 1] ? row[j] : row[j - 1]);
      diag = up;
    }
  }
  return row[lb];
}

void mu_suggest_init(struct mu_suggest *s, const char *word)
{
  s->word = word;
  s->word_len = strcspn(word, "=");
  s->best = NULL;
  s->best_score = 0;
}

void mu_suggest_add(struct mu_suggest *s, const char *candidate)
{
  size_t lc;
  if (candidate == NULL || s->word_len == 0 || s->word_len > 64)
    return;
  lc = strlen(candidate);
  if (lc == 0 || lc > 64)
    return;
  /* similarity = 2 * common / total, in thousandths; close from 0.6 on */
  int score = (int)(2000 * (size_t)lcs(s->word, s->word_len, candidate, lc) / (s->word_len + lc));
  if (score < 600 || score <= s->best_score)
    return;
  s->best = candidate;
  s->best_score = score;
}

const char *mu_suggest_best(const struct mu_suggest *s)
{
  return s->best;
}
