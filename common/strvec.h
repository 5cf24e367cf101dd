/* A NULL-terminated vector of owned strings (argv-style). */
#ifndef MU_STRVEC_H
#define MU_STRVEC_H

#include <stddef.h>

struct mu_strvec {
  char **v; /* NULL-terminated once anything is pushed; NULL before */
  size_t n;
  size_t cap;
};

#define MU_STRVEC_INIT                                                                             \
  {                                                                                                \
    NULL, 0, 0                                                                                     \
  }

/* Appends a copy of s. */
void mu_strvec_push(struct mu_strvec *sv, const char *s);
/* Appends s itself. Ownership: takes s (frees it with mu_free()). */
void mu_strvec_push_owned(struct mu_strvec *sv, char *s);
void mu_strvec_pushf(struct mu_strvec *sv, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Frees every string and the vector. Accepts NULL. */
void mu_strvec_release(struct mu_strvec *sv);

#endif
