/* Prefixed lines out of a byte stream: the output of several processes interleaved line by line,
 * each line tagged with where it came from ("[3]:" for a worker of `muster agent`, "trainer/0 "
 * for a replica in `muster log`). Bytes come in chunks that cut lines anywhere; a line comes out
 * whole, once its newline arrived. Library code: never prints.
 *
 *   struct mu_line_prefixer lp;
 *   mu_line_prefixer_init(&lp, "[3]:", 65536);
 *   mu_line_prefixer_filter(&lp, keep, data);     (optional: only the lines keep() says)
 *   mu_line_prefixer_feed(&lp, chunk, n, &out);   (appends the complete lines to out)
 *   mu_line_prefixer_flush(&lp, &out);            (at the end: the unfinished line, if any)
 *   mu_line_prefixer_release(&lp);
 */
#ifndef MU_LINES_H
#define MU_LINES_H

#include <stddef.h>

#include "buf.h"

/* A filter: returns nonzero to keep the line line[0..n) (its newline not included). */
typedef int mu_line_keep_fn(void *data, const char *line, size_t n);

struct mu_line_prefixer {
  char *prefix;
  struct mu_buf partial; /* the unfinished line; its cap is the longest line kept whole */
  mu_line_keep_fn *keep; /* NULL: every line */
  void *keep_data;
  int verdict; /* of a line written in pieces so far: -1 none yet, 0 dropped, 1 kept */
};

/* Starts a stream whose lines get `prefix`. A line longer than max_line bytes (its input is not
 * ours to bound) comes out in pieces of max_line bytes, each written as a line.
 * Ownership: copies prefix; release with mu_line_prefixer_release(). */
void mu_line_prefixer_init(struct mu_line_prefixer *lp, const char *prefix, size_t max_line);

/* Appends every line of data[0..n) that is now complete to out, as prefix + line + "\n"; keeps
 * the rest for the next call. Ownership: out is the caller's; a refused append (out's cap)
 * drops the line. */
void mu_line_prefixer_feed(struct mu_line_prefixer *lp, const char *data, size_t n,
                           struct mu_buf *out);

/* Keeps only the lines for which keep(data, line, n) is nonzero, asked before the prefix is
 * added, without the newline. A line longer than max_line goes by its first piece's verdict.
 * Ownership: data is borrowed while the prefixer is in use. */
void mu_line_prefixer_filter(struct mu_line_prefixer *lp, mu_line_keep_fn *keep, void *data);

/* Appends the unfinished line, if any, with a newline. */
void mu_line_prefixer_flush(struct mu_line_prefixer *lp, struct mu_buf *out);

/* Frees the prefix and the unfinished line. Accepts NULL. */
void mu_line_prefixer_release(struct mu_line_prefixer *lp);

#endif
