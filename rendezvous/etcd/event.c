/* etcd v2 events (see event.h). */
#include "alloc.h"
#include "event.h"

const char *v2_event_action_name(enum v2_event_action a)
{
  static const char *names[] = {
      "get", "create", "set", "update", "delete", "compareAndSwap", "compareAndDelete", "expire"};
  if ((unsigned)a < sizeof(names) / sizeof(names[0]))
    return names[a];
  return "unknown";
}

static void src_free(struct v2_event_src *src)
{
  if (src == NULL)
    return;
  mu_free(src->value);
  mu_free(src->prev_value);
  mu_free(src);
}

size_t v2_event_bytes(const struct v2_event *e)
{
  if (e->src == NULL)
    return e->json_len;
  return sizeof(*e->src) + e->src->vlen + e->src->prev_vlen;
}

void v2_event_set_json(struct v2_event *e, char *json, size_t len, size_t head)
{
  src_free(e->src);
  e->src = NULL;
  mu_free(e->json);
  e->json = json;
  e->json_len = len;
  e->json_head = head;
}

void v2_event_free(struct v2_event *e)
{
  if (e == NULL)
    return;
  mu_free(e->key);
  mu_free(e->prev_key);
  mu_free(e->json);
  src_free(e->src);
  mu_free(e);
}
