/* YAML out (block style from a cJSON tree) and in (libyaml's document loader into cJSON).
 * See yaml_tree.h for the contract. */
#include "yaml_tree.h"

#include <ctype.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <yaml.h>

#include "alloc.h"
#include "muster/errno.h"

/* ---------------------------------------------------------------------------------------------
 * Emitter
 */

/* Words a YAML 1.1 reader resolves to something other than a string. */
static const char *const reserved[] = {"y",    "n",     "yes",   "no",   "true", "false",
                                       "on",   "off",   "null",  "~",    "=",    "<<",
                                       ".inf", "-.inf", "+.inf", ".nan", NULL};

static int plain_char_ok(unsigned char c)
{
  return isalnum(c) || (c != 0 && strchr(" _./:=+-$(),;<>?^~\\", c) != NULL);
}

/* Whether s must be quoted: plain, a YAML 1.1 or 1.2 reader could take it for something other
 * than the same string (a bool, null, number, date, base-60 integer, merge key, indicator,
 * comment), or lose a character (a space at either end, anything outside printable ASCII). */
static int needs_quotes(const char *s)
{
  size_t n = strlen(s), i;

  if (n == 0)
    return 1;
  for (i = 0; reserved[i] != NULL; i++)
    if (strcasecmp(s, reserved[i]) == 0)
      return 1;
  /* Anything that may read as a number, a date or a base-60 integer ("._1" is a 1.1 float). */
  if (isdigit((unsigned char)s[0]))
    return 1;
  if (strchr("+-.", s[0]) != NULL && (isdigit((unsigned char)s[1]) || strchr("._", s[1]) != NULL))
    return 1;
  /* Indicators that may not start a plain scalar. */
  if (strchr("?:,[]{}#&*!|>'\"%@`~<=", s[0]) != NULL)
    return 1;
  if (s[0] == '-' && (s[1] == '\0' || s[1] == ' ' || strncmp(s, "---", 3) == 0))
    return 1;
  if (s[0] == ' ' || s[n - 1] == ' ' || s[n - 1] == ':')
    return 1;
  for (i = 0; i < n; i++) {
    if (!plain_char_ok((unsigned char)s[i]))
      return 1;
    if (s[i] == ':' && s[i + 1] == ' ')
      return 1;
    if (s[i] == ' ' && s[i + 1] == '#')
      return 1;
  }
  return 0;
}

/* Decodes the UTF-8 character at s (NUL-terminated) into *cp. Returns: its length in bytes, or 0
 * when s does not start with a valid, shortest-form UTF-8 character (surrogates refused). */
static size_t utf8_next(const unsigned char *s, unsigned long *cp)
{
  static const unsigned long min[] = {0, 0, 0x80, 0x800, 0x10000};
  size_t len = 0;
  unsigned long c = 0;
  if (s[0] < 0x80) {
    len = 1;
    c = s[0];
  } else if (s[0] >= 0xc2 && s[0] < 0xe0) {
    len = 2;
    c = s[0] & 0x1fu;
  } else if (s[0] >= 0xe0 && s[0] < 0xf0) {
    len = 3;
    c = s[0] & 0x0fu;
  } else if (s[0] >= 0xf0 && s[0] < 0xf5) {
    len = 4;
    c = s[0] & 0x07u;
  }
  for (size_t i = 1; i < len; i++) {
    if ((s[i] & 0xc0) != 0x80)
      return 0;
    c = (c << 6) | (s[i] & 0x3fu);
  }
  if (len == 0 || c < min[len] || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
    return 0;
  *cp = c;
  return len;
}

/* Whether s is valid UTF-8. Returns: 1 or 0. */
static int utf8_ok(const char *s)
{
  unsigned long cp;
  for (const unsigned char *p = (const unsigned char *)s; *p;) {
    size_t k = utf8_next(p, &cp);
    if (k == 0)
      return 0;
    p += k;
  }
  return 1;
}

/* Whether code point c must be written as an escape in a double-quoted scalar: everything
 * outside YAML's printable set, every line break (YAML 1.1 folds U+0085, U+2028 and U+2029 like
 * '\n', in any quoting), tabs, and the byte-order mark. */
static int needs_escape(unsigned long c)
{
  if (c < 0x20 || c == 0x7f || (c >= 0x80 && c <= 0x9f))
    return 1;
  return c == 0x2028 || c == 0x2029 || c == 0xfeff || c == 0xfffe || c == 0xffff;
}

const char *mu_yaml_invalid(const cJSON *node)
{
  const cJSON *c;
  if (node == NULL)
    return NULL;
  if (node->string != NULL && !utf8_ok(node->string))
    return node->string;
  if (cJSON_IsString(node) && node->valuestring != NULL && !utf8_ok(node->valuestring))
    return node->valuestring;
  cJSON_ArrayForEach(c, node)
  {
    const char *bad = mu_yaml_invalid(c);
    if (bad != NULL)
      return bad;
  }
  return NULL;
}

/* Writes s double-quoted, every character needs_escape() names as an escape that YAML 1.1 and
 * 1.2 readers both know (\xNN, \uNNNN, \n, \t, \r). */
static int emit_double_quoted(const char *s, struct mu_buf *out)
{
  const unsigned char *p = (const unsigned char *)s;
  int rc = mu_buf_putc(out, '"');
  while (*p && rc == 0) {
    unsigned long c = 0;
    size_t k = utf8_next(p, &c);
    if (k == 0)
      return MU_EINVAL;
    if (c == '"' || c == '\\')
      rc = mu_buf_printf(out, "\\%c", (int)c);
    else if (c == '\n' || c == '\t' || c == '\r')
      rc = mu_buf_printf(out, "\\%c", c == '\n' ? 'n' : c == '\t' ? 't' : 'r');
    else if (needs_escape(c))
      rc = c <= 0xff ? mu_buf_printf(out, "\\x%02lx", c) : mu_buf_printf(out, "\\u%04lx", c);
    else
      rc = mu_buf_append(out, p, k);
    p += k;
  }
  return rc ? rc : mu_buf_putc(out, '"');
}

/* The one quoting of a string for YAML's syntax (keys and values alike): plain when a YAML 1.1
 * reader gives back the same string, else single-quoted when no character needs an escape, else
 * double-quoted with escapes. Returns: 0; MU_EINVAL when s is not valid UTF-8 (YAML has no way
 * to carry it: mu_yaml_invalid() finds it first); MU_E2BIG at out's cap. */
static int emit_scalar_string(const char *s, struct mu_buf *out)
{
  const unsigned char *p;
  int esc = 0, rc = 0;

  if (!needs_quotes(s))
    return mu_buf_puts(out, s);
  for (p = (const unsigned char *)s; *p;) {
    unsigned long c = 0;
    size_t k = utf8_next(p, &c);
    if (k == 0)
      return MU_EINVAL;
    esc |= needs_escape(c);
    p += k;
  }
  if (esc)
    return emit_double_quoted(s, out);
  rc = mu_buf_putc(out, '\'');
  for (p = (const unsigned char *)s; *p && rc == 0; p++)
    rc = *p == '\'' ? mu_buf_puts(out, "''") : mu_buf_putc(out, (char)*p);
  return rc ? rc : mu_buf_putc(out, '\'');
}

static int emit_scalar(const cJSON *n, struct mu_buf *out)
{
  if (cJSON_IsString(n))
    return emit_scalar_string(n->valuestring ? n->valuestring : "", out);
  if (cJSON_IsBool(n))
    return mu_buf_puts(out, cJSON_IsTrue(n) ? "true" : "false");
  if (cJSON_IsNumber(n)) {
    double d = n->valuedouble;
    if (d == floor(d) && fabs(d) < 1e15)
      return mu_buf_printf(out, "%lld", (long long)d);
    return mu_buf_printf(out, "%.17g", d);
  }
  return mu_buf_puts(out, "null");
}

static int indent_to(struct mu_buf *out, int indent)
{
  int i, rc = 0;
  for (i = 0; i < indent && rc == 0; i++)
    rc = mu_buf_putc(out, ' ');
  return rc;
}

static int is_nonempty_container(const cJSON *n)
{
  return (cJSON_IsObject(n) || cJSON_IsArray(n)) && n->child != NULL;
}

static int emit_node(const cJSON *n, int indent, int first_inline, struct mu_buf *out);

/* The value after "key:" or "-": inline scalars and empty containers, else a new block. */
static int emit_value(const cJSON *v, int indent, struct mu_buf *out)
{
  int rc;

  if (cJSON_IsObject(v) && v->child == NULL)
    return mu_buf_puts(out, " {}\n");
  if (cJSON_IsArray(v) && v->child == NULL)
    return mu_buf_puts(out, " []\n");
  if (!is_nonempty_container(v)) {
    rc = mu_buf_putc(out, ' ');
    if (rc == 0)
      rc = emit_scalar(v, out);
    return rc ? rc : mu_buf_putc(out, '\n');
  }
  rc = mu_buf_putc(out, '\n');
  /* Sequences under a key sit at the key's indent (as PyYAML and kubectl write them). */
  return rc ? rc : emit_node(v, cJSON_IsArray(v) ? indent : indent + 2, 0, out);
}

/* Writes a non-empty container at indent. With first_inline the first line continues the
 * current one (after "- "). */
static int emit_node(const cJSON *n, int indent, int first_inline, struct mu_buf *out)
{
  const cJSON *c;
  int rc = 0, first = 1;

  for (c = n->child; c != NULL && rc == 0; c = c->next, first = 0) {
    if (!(first && first_inline))
      rc = indent_to(out, indent);
    if (rc)
      break;
    if (cJSON_IsObject(n)) {
      rc = emit_scalar_string(c->string ? c->string : "", out);
      if (rc == 0)
        rc = mu_buf_putc(out, ':');
      if (rc == 0)
        rc = emit_value(c, indent, out);
      continue;
    }
    /* Sequence item. */
    if (is_nonempty_container(c)) {
      rc = mu_buf_puts(out, "- ");
      if (rc == 0)
        rc = emit_node(c, indent + 2, 1, out);
    } else {
      rc = mu_buf_putc(out, '-');
      if (rc == 0)
        rc = emit_value(c, indent, out);
    }
  }
  return rc;
}

int mu_yaml_emit(const cJSON *node, struct mu_buf *out)
{
  int rc;

  if (is_nonempty_container(node))
    return emit_node(node, 0, 0, out);
  if (cJSON_IsObject(node))
    return mu_buf_puts(out, "{}\n");
  if (cJSON_IsArray(node))
    return mu_buf_puts(out, "[]\n");
  rc = emit_scalar(node, out);
  return rc ? rc : mu_buf_putc(out, '\n');
}

/* ---------------------------------------------------------------------------------------------
 * Reader
 */

static cJSON *resolve_plain(const char *s)
{
  static const char *const nulls[] = {"", "~", "null", NULL};
  static const char *const trues[] = {"true", "yes", "on", "y", NULL};
  static const char *const falses[] = {"false", "no", "off", "n", NULL};
  char *end = NULL;
  size_t i;
  double d;

  for (i = 0; nulls[i]; i++)
    if (strcasecmp(s, nulls[i]) == 0)
      return cJSON_CreateNull();
  for (i = 0; trues[i]; i++)
    if (strcasecmp(s, trues[i]) == 0)
      return cJSON_CreateTrue();
  for (i = 0; falses[i]; i++)
    if (strcasecmp(s, falses[i]) == 0)
      return cJSON_CreateFalse();
  if (*s && (isdigit((unsigned char)s[0]) ||
             (strchr("+-.", s[0]) && (isdigit((unsigned char)s[1]) || s[1] == '.')))) {
    d = strtod(s, &end);
    if (end && *end == '\0' && strspn(s, "0123456789+-.eE") == strlen(s))
      return cJSON_CreateNumber(d);
  }
  return cJSON_CreateString(s);
}

/* What a document may expand to: aliases repeat a node wherever they point, so a few hundred
 * bytes of nested aliases ("billion laughs") would otherwise become billions of nodes. Beyond
 * the nodes and scalar bytes the document spells out once, its aliases may add this much. */
#define YAML_ALIAS_NODES (64u << 10)
#define YAML_ALIAS_BYTES (4u << 20)

struct budget {
  size_t nodes; /* nodes the conversion may still create */
  size_t bytes; /* scalar bytes it may still copy */
};

/* Takes one node of `bytes` scalar bytes out of the budget. Returns: 0, or -1 when spent. */
static int budget_take(struct budget *b, size_t bytes)
{
  if (b->nodes == 0 || b->bytes < bytes)
    return -1;
  b->nodes--;
  b->bytes -= bytes;
  return 0;
}

/* The budget of a document: what it spells out (every node once), plus the alias allowance. */
static struct budget budget_of(yaml_document_t *doc)
{
  struct budget b = {YAML_ALIAS_NODES, YAML_ALIAS_BYTES};
  for (yaml_node_t *n = doc->nodes.start; n < doc->nodes.top; n++) {
    b.nodes++;
    if (n->type == YAML_SCALAR_NODE)
      b.bytes += n->data.scalar.length;
  }
  return b;
}

/* convert()'s answer when it cannot: the budget was spent, or the tree is not JSON-shaped. */
enum { CONVERT_SHAPE = 1, CONVERT_BUDGET };

static cJSON *convert(yaml_document_t *doc, yaml_node_t *node, unsigned flags, int depth,
                      struct budget *b, int *why);

static cJSON *convert_sequence(yaml_document_t *doc, yaml_node_t *node, unsigned flags, int depth,
                               struct budget *b, int *why)
{
  cJSON *out = cJSON_CreateArray();
  for (yaml_node_item_t *item = node->data.sequence.items.start;
       item < node->data.sequence.items.top; item++) {
    cJSON *child = convert(doc, yaml_document_get_node(doc, *item), flags, depth + 1, b, why);
    if (child == NULL) {
      cJSON_Delete(out);
      return NULL;
    }
    cJSON_AddItemToArray(out, child);
  }
  return out;
}

static cJSON *convert_mapping(yaml_document_t *doc, yaml_node_t *node, unsigned flags, int depth,
                              struct budget *b, int *why)
{
  cJSON *out = cJSON_CreateObject();
  for (yaml_node_pair_t *pair = node->data.mapping.pairs.start; pair < node->data.mapping.pairs.top;
       pair++) {
    yaml_node_t *k = yaml_document_get_node(doc, pair->key);
    if (k == NULL || k->type != YAML_SCALAR_NODE) {
      *why = CONVERT_SHAPE;
      cJSON_Delete(out);
      return NULL;
    }
    if (budget_take(b, k->data.scalar.length) != 0) {
      *why = CONVERT_BUDGET;
      cJSON_Delete(out);
      return NULL;
    }
    cJSON *child = convert(doc, yaml_document_get_node(doc, pair->value), flags, depth + 1, b, why);
    if (child == NULL) {
      cJSON_Delete(out);
      return NULL;
    }
    cJSON_AddItemToObject(out, (const char *)k->data.scalar.value, child);
  }
  return out;
}

/* The tree under node, every node (an alias's target each time it is named) taken out of b.
 * Returns: the tree, or NULL with *why set. */
static cJSON *convert(yaml_document_t *doc, yaml_node_t *node, unsigned flags, int depth,
                      struct budget *b, int *why)
{
  if (node == NULL || depth > 64) {
    *why = CONVERT_SHAPE;
    return NULL;
  }
  if (budget_take(b, node->type == YAML_SCALAR_NODE ? node->data.scalar.length : 0) != 0) {
    *why = CONVERT_BUDGET;
    return NULL;
  }
  switch (node->type) {
  case YAML_SCALAR_NODE:
    if (node->data.scalar.style == YAML_PLAIN_SCALAR_STYLE && !(flags & MU_YAML_STRINGS))
      return resolve_plain((const char *)node->data.scalar.value);
    return cJSON_CreateString((const char *)node->data.scalar.value);
  case YAML_SEQUENCE_NODE:
    return convert_sequence(doc, node, flags, depth, b, why);
  case YAML_MAPPING_NODE:
    return convert_mapping(doc, node, flags, depth, b, why);
  default:
    *why = CONVERT_SHAPE;
    return NULL;
  }
}

int mu_yaml_read(const char *text, size_t len, unsigned flags, cJSON **out, size_t *line,
                 struct mu_buf *err)
{
  yaml_parser_t parser;
  yaml_document_t doc;
  int rc = 0, why = 0;

  *out = NULL;
  *line = 0;
  if (!yaml_parser_initialize(&parser))
    return MU_ENOMEM;
  yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
  if (!yaml_parser_load(&parser, &doc)) {
    *line = parser.problem_mark.line + 1;
    mu_buf_puts(err, parser.problem ? parser.problem : "YAML syntax error");
    yaml_parser_delete(&parser);
    return MU_EPARSE;
  }
  yaml_node_t *root = yaml_document_get_root_node(&doc);
  if (root == NULL) {
    rc = MU_ENOENT;
  } else if ((flags & MU_YAML_MAPPING) && root->type != YAML_MAPPING_NODE) {
    rc = MU_ENOENT;
  } else {
    struct budget b = budget_of(&doc);
    *out = convert(&doc, root, flags, 0, &b, &why);
    if (*out == NULL && why == CONVERT_BUDGET) {
      mu_buf_printf(err,
                    "its aliases expand it past %u nodes or %u MiB beyond what it spells out "
                    "(nested aliases, a 'billion laughs'?); write the repeated parts out",
                    YAML_ALIAS_NODES, YAML_ALIAS_BYTES >> 20);
      rc = MU_E2BIG;
    } else if (*out == NULL) {
      rc = MU_EINVAL;
    }
  }
  yaml_document_delete(&doc);
  yaml_parser_delete(&parser);
  return rc;
}

int mu_yaml_parse(const char *text, size_t len, cJSON **out, struct mu_buf *err)
{
  struct mu_buf why = MU_BUF_INIT(SIZE_MAX);
  size_t line = 0;
  int rc = mu_yaml_read(text, len, 0, out, &line, &why);
  if (rc == MU_EPARSE)
    mu_buf_printf(err, "YAML line %zu: %s", line, mu_buf_str(&why));
  else if (rc == MU_ENOENT)
    mu_buf_puts(err, "YAML: empty document");
  else if (rc == MU_EINVAL)
    mu_buf_puts(err, "YAML: unsupported structure (non-scalar key or nesting over 64)");
  else if (rc == MU_E2BIG)
    mu_buf_printf(err, "YAML: %s", mu_buf_str(&why));
  if (rc == MU_ENOENT || rc == MU_EINVAL || rc == MU_E2BIG)
    rc = MU_EPARSE;
  mu_buf_release(&why);
  return rc;
}
