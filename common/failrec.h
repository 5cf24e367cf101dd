/* Failure records: what `muster agent` knows about a worker that failed (rank, exit code or
 * signal, the exception line, where and when), in one JSON shape that every reader shares.
 *
 * The agent writes a record as torchrun does: to the file named by its own
 * TORCHELASTIC_ERROR_FILE (the local scheduler points it into the replica's directory), and as
 * one line on its stderr, "[muster agent] failure record: {...}", which the Slurm and Kubernetes
 * schedulers find in the last lines of the job's log. The JSON is PyTorch's error-file shape
 * (what `@record` writes: {"message": {"message": ..., "extraInfo": {"py_callstack": ...,
 * "timestamp": ...}}}) with one more member, "muster", holding the fields below
 * (docs/agent.md, "Failure records"). A reader also accepts a plain PyTorch error file.
 * Library code: never prints.
 */
#ifndef MU_FAILREC_H
#define MU_FAILREC_H

#include <stddef.h>

#include "buf.h"

/* The tag in front of the record's JSON on the agent's stderr line. */
#define MU_FAILREC_TAG "failure record: "

struct mu_failrec {
  char *run_id;      /* the rendezvous run */
  long round;        /* the round the worker ran in */
  int attempt;       /* 1 for the first attempt of the agent */
  int restarts;      /* restarts of the workers done after this failure (0: it was the last) */
  int rank;          /* global rank; -1 unknown */
  int local_rank;    /* -1 unknown */
  int node_rank;     /* -1 unknown */
  char *role;        /* ROLE_NAME */
  char *node;        /* the agent's node id */
  char *host;        /* gethostname() */
  char *addr;        /* the address the node joined with */
  long pid;          /* the worker's pid */
  int exit_code;     /* the exit code; -1 when killed by a signal */
  int signal;        /* the signal that killed it, 0 if none */
  int oom;           /* 1: SIGKILL while the cgroup's oom_kill count rose */
  long long time_ms; /* when the worker ended, Unix ms */
  char *source;      /* "error_file" (the worker's own), "stderr" (its last lines) or "exit" */
  char *exception;   /* one line: "RuntimeError: ..." or the last stderr line; "" if none */
  char *details;     /* the traceback or the last stderr lines; may be "" */
  int muster;        /* 1 when the text had the "muster" member (0: a plain torch file) */
  char *hung;        /* NULL, or how it hung: "no progress for 4 s" (the exception is then
                      * its innermost frame, "train.py:42 in step") */
  int waiting;       /* hung inside a library (a collective, waiting for another rank) */
};

/* Frees the strings and zeroes the record. Accepts NULL. */
void mu_failrec_release(struct mu_failrec *r);

/* Returns: the signal's name ("SIGKILL"), or NULL for a number we do not name.
 * Ownership: static. */
const char *mu_failrec_signame(int sig);

/* Encodes r as one line of JSON (no newline), the error-file shape of the header comment.
 * Returns: the text. Ownership: caller frees with mu_free(). */
char *mu_failrec_to_json(const struct mu_failrec *r);

/* Decodes a record, or a plain PyTorch error file (only exception, details and time filled).
 * Returns: 0; MU_EINVAL when text is not such JSON. Ownership: fills *out (release it). */
int mu_failrec_parse(const char *text, size_t len, struct mu_failrec *out);

/* Finds the last "failure record: {...}" line in text (a log's tail).
 * Returns: 0 with *out filled; MU_ENOENT when no line holds a readable record. */
int mu_failrec_scan(const char *text, size_t len, struct mu_failrec *out);

/* Appends one line without newline: "rank 2 (node rank 1 on host vm) exited with code 1:
 * RuntimeError: boom", with the signal and the memory hint when there is one. */
void mu_failrec_summary(const struct mu_failrec *r, struct mu_buf *out);

/* The same, naming the replica whose log or error file held the record first: "rank 2
 * (replica trainer/0, node rank 1 on host vm) ...". The node rank is the rendezvous's (the order
 * the nodes joined in), which need not be the replica's index. role NULL: mu_failrec_summary. */
void mu_failrec_summary_replica(const struct mu_failrec *r, const char *role, long replica,
                                struct mu_buf *out);

/* Returns: nonzero when a is earlier than b (the root cause of a job is its earliest failure);
 * a record without time is later than one with, and a rank that hung waiting inside a library
 * (for the rank that really hung) is later than any other. */
int mu_failrec_earlier(const struct mu_failrec *a, const struct mu_failrec *b);

/* Picks the exception line out of a message or a stream's last lines: the last non-empty line
 * that looks like "Name: text" or "Name" (a Python exception), else the last non-empty line.
 * Returns: the line. Ownership: caller frees with mu_free(). */
char *mu_failrec_exception_line(const char *text);

/* The innermost frame of a Python faulthandler dump ("Thread 0x... (most recent call first):"
 * blocks of `  File "PATH", line N in FUNC`): of the main thread (the block with a
 * "<module>" frame), else of the "Current thread", else of the first: "train.py:42 in step".
 * *library (may be NULL) gets 1 when that frame is in an installed package or the standard
 * library (site-packages, dist-packages, lib/pythonX), i.e. the rank waits inside a library.
 * Returns: the frame, or NULL when `text` holds no dump. Ownership: caller frees (mu_free). */
char *mu_failrec_innermost_frame(const char *text, int *library);

#endif
