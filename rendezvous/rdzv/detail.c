/* What the status page and `muster rdzv` show of a run beyond its round: each node's lease (or
 * what holds it: "standby" for a pending join beyond a full active round) and each barrier
 * with the ids that arrived. Read-only, O(nodes + arrivals). */
#include <inttypes.h>
#include <string.h>

#include "json.h"
#include "rdzv_int.h"

void rdzv_run_detail_json(const struct rdzv_run *run, struct mu_buf *b)
{
  uint64_t now = rdzv_now(run->rv);
  uint32_t standbys = rdzv_standbys(run); /* while it is nonzero, every pending join is one */
  int first = 1;
  mu_buf_puts(b, ",\"leases\":[");
  for (struct mu_hnode *h = mu_htab_next(&run->nodes, NULL); h != NULL;
       h = mu_htab_next(&run->nodes, h)) {
    const struct rdzv_node *n = node_of(h);
    const char *state = n->join && standbys > 0 && n->round != run->round ? "standby"
                        : n->join                                         ? "joining"
                        : n->nwatch > 0                                   ? "watching"
                                                                          : "lease";
    mu_buf_puts(b, first ? "{\"node_id\":" : ",{\"node_id\":");
    first = 0;
    mu_json_str(b, n->h.key, strlen(n->h.key));
    mu_buf_printf(b, ",\"state\":\"%s\"", state);
    if (n->in_lease && n->nwatch == 0 && !n->join) {
      int64_t left = (int64_t)n->expires - (int64_t)now;
      int64_t ago = (int64_t)run->lease_ttl_ms - left;
      mu_buf_printf(b, ",\"lease_left_ms\":%" PRId64 ",\"last_seen_ms_ago\":%" PRId64,
                    left > 0 ? left : 0, ago > 0 ? ago : 0);
    }
    mu_buf_putc(b, '}');
  }
  mu_buf_puts(b, "],\"barriers\":[");
  first = 1;
  for (struct mu_hnode *h = mu_htab_next(&run->barriers, NULL); h != NULL;
       h = mu_htab_next(&run->barriers, h)) {
    const struct barrier *br = MU_CONTAINER_OF(h, struct barrier, h);
    mu_buf_puts(b, first ? "{\"name\":" : ",{\"name\":");
    first = 0;
    mu_json_str(b, br->h.key, strlen(br->h.key));
    mu_buf_printf(b, ",\"count\":%" PRIu32 ",\"generation\":%" PRIu64 ",\"arrived\":[", br->count,
                  br->generation);
    int fa = 1;
    for (struct mu_list_node *x = br->arrivals.head; x != NULL; x = x->next) {
      const struct rdzv_wait *w = MU_CONTAINER_OF(x, struct rdzv_wait, link);
      const char *id = w->barrier_id ? w->barrier_id : "(anonymous)";
      if (!fa)
        mu_buf_putc(b, ',');
      fa = 0;
      mu_json_str(b, id, strlen(id));
    }
    mu_buf_puts(b, "]}");
  }
  mu_buf_putc(b, ']');
}
