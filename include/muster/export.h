/* MU_EXTERN marks the functions libmuster.so exports: its API, the functions declared in
 * include/muster/ and nothing else. The library is built with -fvisibility=hidden, so every
 * other symbol of its objects (the rest of common/, llhttp) stays inside it
 * (tests/cli/t0009-libmuster-exports.sh checks `nm -D` against the declarations).
 */
#ifndef MUSTER_EXPORT_H
#define MUSTER_EXPORT_H

#if defined(__GNUC__) || defined(__clang__)
#define MU_EXTERN __attribute__((visibility("default")))
#else
#define MU_EXTERN
#endif

#endif
