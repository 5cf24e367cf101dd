/* muster agent: placeholder until its issue lands (replaced by the real command). */
#include "cmds.h"
#include "log.h"

int cmd_agent(int argc, char **argv)
{
  (void)argc;
  (void)argv;
  mu_error("'muster agent' is not available in this build yet");
  return 1;
}
