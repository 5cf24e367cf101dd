/* musterd: placeholder entry point until the server lands. */
#include <stdio.h>
#include <string.h>

#include "muster/mu.h"

int main(int argc, char **argv)
{
  if (argc > 1 && strcmp(argv[1], "--version") == 0) {
    printf("musterd %s\n", MU_VERSION);
    return 0;
  }
  fprintf(stderr, "musterd: not built yet\n");
  return 1;
}
