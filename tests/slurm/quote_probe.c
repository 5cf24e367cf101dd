/* mu_quote_probe: the Slurm renderer's quoting functions (launcher/sched/slurm.h) from the
 * command line, for tests/integration/slurm_security.sh, which puts what they print through the
 * real sbatch and srun and checks the value that arrives. Test-only; never installed.
 *
 *   mu_quote_probe directive VALUE      an #SBATCH option value
 *   mu_quote_probe export NAME VALUE    one item of srun's --export list
 *
 * Prints the quoted text without a newline; exits 1 when the syntax cannot carry the value. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "buf.h"
#include "slurm.h"

int main(int argc, char **argv)
{
  struct mu_buf b = MU_BUF_INIT(SIZE_MAX);
  int rc = 2;
  if (argc == 3 && strcmp(argv[1], "directive") == 0)
    rc = mu_slurm_quote_directive(argv[2], &b) == 0 ? 0 : 1;
  else if (argc == 4 && strcmp(argv[1], "export") == 0)
    rc = mu_slurm_quote_export(argv[2], argv[3], &b) == 0 ? 0 : 1;
  else
    fprintf(stderr, "usage: mu_quote_probe directive VALUE | export NAME VALUE\n");
  if (rc == 0)
    fwrite(b.data ? b.data : "", 1, b.len, stdout);
  mu_buf_release(&b);
  return rc;
}
