#!/usr/bin/env node
// validate-k8s.mjs: would a Kubernetes cluster running Volcano v1.15.1 or JobSet v0.9.1 accept
// these manifests? No API server can run on the test machines, so tests/cli/t2010-k8s-schema.sh
// asks this instead, for every Volcano Job and JobSet muster generates.
//
//   node tests/schemas/validate-k8s.mjs [--crds DIR]... [--modules DIR] [-q] FILE...
//   node tests/schemas/validate-k8s.mjs [--modules DIR] --print FILE...
//
// A FILE holds YAML documents (---) or one JSON document. Each document is checked
//  1. against the openAPIV3Schema of its kind in the CRDs of the DIRs (default: volcano-v1.15.1/,
//     jobset-v0.9.1/ and kubernetes-api/ next to this file; a DIR's *.json files are the JSON
//     schemas of built-in kinds, named by their x-kubernetes-group-version-kind: the
//     resource.k8s.io/v1 ResourceClaimTemplate and networking.k8s.io/v1 NetworkPolicy that muster
//     creates with a job, kubernetes-api/PROVENANCE.md), with unknown fields rejected as
//     `kubectl --validate=strict` does;
//  2. against the create-time rules a schema cannot express: for a Volcano Job, Volcano's
//     ValidatingAdmissionPolicy (volcano-v1.15.1/jobs-validating-admission-policy.yaml, which
//     is CEL and is restated here in JavaScript); for a JobSet, JobSet's validating webhook and
//     the CRD's CEL rules (jobset-v0.9.1/SOURCE.md lists them); for both, the Kubernetes
//     object-meta and pod-spec rules a generated manifest can break (names, labels, containers,
//     mounts, ports, resources).
// --print writes what the YAML parser (YAML 1.1, as the API server reads it) reads from each
// file, one JSON document per line, and checks nothing.
// It prints one line per document and its problems, then "N document(s): V valid, I invalid".
// Exit status: 0 all valid, 1 some invalid or unreadable, 2 usage error or missing packages.
//
// It needs the npm packages ajv@8, ajv-formats@3 and yaml@2, which
// `scripts/install-deps.sh --test` puts in $MU_NPM_CACHE or ${XDG_CACHE_HOME:-~/.cache}/
// muster-vjv; --modules DIR (a node_modules folder) or NODE_PATH point elsewhere.

import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const DEFAULT_CRDS = [path.join(HERE, 'volcano-v1.15.1'), path.join(HERE, 'jobset-v0.9.1'),
  path.join(HERE, 'kubernetes-api')];

function die(msg) {
  process.stderr.write(`validate-k8s: ${msg}\n`);
  process.exit(2);
}

// ------------------------------------------------------------------------------ arguments

const args = { crds: [], modules: null, quiet: false, print: false, files: [] };
for (let i = 2; i < process.argv.length; i++) {
  const a = process.argv[i];
  const value = () => {
    if (i + 1 >= process.argv.length) die(`${a} needs a value`);
    return process.argv[++i];
  };
  if (a === '--crds') args.crds.push(value());
  else if (a === '--modules') args.modules = value();
  else if (a === '-q') args.quiet = true;
  else if (a === '--print') args.print = true;
  else if (a === '-h' || a === '--help') {
    process.stdout.write('usage: validate-k8s.mjs [--crds DIR]... [--modules DIR] [-q] FILE...\n' +
      '       validate-k8s.mjs [--modules DIR] --print FILE...   (the documents as this parser reads them, as JSON)\n');
    process.exit(0);
  } else if (a.startsWith('-') && a !== '-') die(`unknown option '${a}' (see --help)`);
  else args.files.push(a);
}
if (args.files.length === 0) die('no manifest given (usage: validate-k8s.mjs [options] FILE...)');
if (args.crds.length === 0) args.crds = DEFAULT_CRDS;

// ------------------------------------------------------------------------------ npm packages

function moduleDirs() {
  if (args.modules) return [path.resolve(args.modules)];
  const cache = process.env.MU_NPM_CACHE ||
    path.join(process.env.XDG_CACHE_HOME || path.join(os.homedir(), '.cache'), 'muster-vjv');
  return [path.join(cache, 'node_modules'), ...(process.env.NODE_PATH || '').split(':').filter(Boolean)];
}
const requireHere = createRequire(import.meta.url);
function load(name) {
  for (const dir of moduleDirs()) {
    try {
      return requireHere(requireHere.resolve(name, { paths: [dir] }));
    } catch (e) {
      if (!e || e.code !== 'MODULE_NOT_FOUND') throw e;
    }
  }
  die(`the npm package '${name}' is not in ${moduleDirs().join(' or ')}; ` +
    'run scripts/install-deps.sh --test (it installs ajv@8 ajv-formats@3 yaml@2 there)');
}
const Ajv = (m => m.default || m)(load('ajv'));
const addFormats = (m => m.default || m)(load('ajv-formats'));
const YAML = load('yaml');

// ------------------------------------------------------------------------------ small tools

const isMap = (v) => v !== null && typeof v === 'object' && !Array.isArray(v);
const q = (v) => JSON.stringify(v);
// Kubernetes name formats (k8s.io/apimachinery/pkg/util/validation).
const LABEL_1123 = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const SUBDOMAIN_1123 = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const LABEL_1035 = /^[a-z]([-a-z0-9]*[a-z0-9])?$/;
const QUALIFIED = /^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$/;
const dnsLabel = (s) => typeof s === 'string' && s.length <= 63 && LABEL_1123.test(s);
const dnsSubdomain = (s) => typeof s === 'string' && s.length <= 253 && SUBDOMAIN_1123.test(s);

// "/spec/tasks/0/name" -> "spec.tasks[0].name"
function jsonPointerToPath(ptr) {
  let out = '';
  for (const raw of ptr.split('/').slice(1)) {
    const key = raw.replace(/~1/g, '/').replace(/~0/g, '~');
    out += /^\d+$/.test(key) ? `[${key}]` : /^[A-Za-z_][\w-]*$/.test(key) ? `${out ? '.' : ''}${key}` : `[${q(key)}]`;
  }
  return out || '(document)';
}
const at = (base, key) => (/^[A-Za-z_][\w-]*$/.test(key) ? `${base}.${key}` : `${base}[${q(key)}]`);

// A Kubernetes quantity ("500m", "4Gi", "1e3", 2) as a number; null when it is not one.
function quantity(v) {
  if (typeof v === 'number') return v;
  if (typeof v !== 'string') return null;
  const m = /^([+-]?(?:\d+\.?\d*|\.\d+))(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|[eE][+-]?\d+)?$/.exec(v);
  if (!m) return null;
  const suffix = m[2] || '';
  const binary = ['Ki', 'Mi', 'Gi', 'Ti', 'Pi', 'Ei'].indexOf(suffix);
  if (binary >= 0) return Number(m[1]) * 1024 ** (binary + 1);
  const decimal = { n: -9, u: -6, m: -3, '': 0, k: 3, M: 6, G: 9, T: 12, P: 15, E: 18 }[suffix];
  return Number(m[1]) * 10 ** (decimal !== undefined ? decimal : Number(suffix.slice(1)));
}

// ------------------------------------------------------------------------------ the schemas

const ajv = new Ajv({ allErrors: true, strict: false, logger: false });
addFormats(ajv);
// Kubernetes accepts formats it does not know; the CRDs use int32, int64 and date-time.
for (const f of ['int32', 'int64', 'byte', 'quantity', 'int-or-string']) {
  if (!ajv.formats[f]) ajv.addFormat(f, true);
}
// x-kubernetes-list-type: set (no duplicate items) and map (no two items with the same keys,
// x-kubernetes-list-map-keys) are enforced by the API server; the other x-kubernetes-*
// keywords only describe the data.
ajv.addKeyword({
  keyword: 'x-kubernetes-list-type',
  errors: true,
  validate: function listType(type, list, schema) {
    listType.errors = [];
    if (!Array.isArray(list) || (type !== 'set' && type !== 'map')) return true;
    const keys = schema['x-kubernetes-list-map-keys'] || [];
    const defaults = (schema.items && schema.items.properties) || {};
    const seen = new Map();
    list.forEach((item, i) => {
      if (type === 'map' && !isMap(item)) return;
      const id = type === 'set' ? q(item)
        : q(keys.map((k) => (k in item ? item[k] : defaults[k] && defaults[k].default)));
      if (seen.has(id)) {
        listType.errors.push({ keyword: 'x-kubernetes-list-type', message: type === 'set'
          ? `item [${i}] repeats item [${seen.get(id)}] in a list of unique items`
          : `item [${i}] has the same ${keys.join(', ')} as item [${seen.get(id)}]`,
        params: {} });
      } else seen.set(id, i);
    });
    return listType.errors.length === 0;
  },
});
for (const k of ['x-kubernetes-list-map-keys', 'x-kubernetes-map-type', 'x-kubernetes-int-or-string',
  'x-kubernetes-preserve-unknown-fields', 'x-kubernetes-embedded-resource']) {
  ajv.addKeyword({ keyword: k });
}

// Unknown fields are errors (the API server prunes them silently, which is how a misspelt
// field goes unnoticed): every object schema that lists properties and does not preserve
// unknown fields gets additionalProperties: false.
function strictCopy(node) {
  if (Array.isArray(node)) return node.map(strictCopy);
  if (!isMap(node)) return node;
  const out = {};
  for (const [k, v] of Object.entries(node)) {
    out[k] = (k === 'enum' || k === 'default' || k === 'example') ? v
      : k === 'properties' ? Object.fromEntries(Object.entries(v).map(([p, s]) => [p, strictCopy(s)]))
        : strictCopy(v);
  }
  if (out.properties && out.additionalProperties === undefined &&
      out['x-kubernetes-preserve-unknown-fields'] !== true) {
    out.additionalProperties = false;
  }
  return out;
}

function parseDocuments(text) {
  const t = text.trimStart();
  if (t.startsWith('{') || t.startsWith('[')) {
    try {
      const v = JSON.parse(text);
      return (Array.isArray(v) ? v : [v]).map((value) => ({ value }));
    } catch { /* YAML after all */ }
  }
  return YAML.parseAllDocuments(text, { version: '1.1', uniqueKeys: true })
    .map((d) => (d.errors.length ? { error: d.errors.map((e) => e.message.split('\n')[0]).join('; ') }
      : { value: d.toJS() }))
    .filter((d) => d.error || (d.value !== null && d.value !== undefined));
}

// --print: what this validator's YAML parser (YAML 1.1, as the API server's) reads from each
// file, one JSON document per line, and nothing else (tests/cli/t2011-k8s-yaml-roundtrip.sh).
if (args.print) {
  for (const file of args.files) {
    for (const d of parseDocuments(fs.readFileSync(file === '-' ? 0 : file, 'utf8'))) {
      if (d.error) die(`${file}: not YAML: ${d.error}`);
      process.stdout.write(`${JSON.stringify(d.value)}\n`);
    }
  }
  process.exit(0);
}

const kinds = new Map(); // "group/version Kind" -> {schema, validate (compiled on first use)}
for (const dir of args.crds) {
  let files;
  try {
    files = fs.readdirSync(dir).filter((f) => /\.ya?ml$/.test(f)).map((f) => path.join(dir, f));
  } catch (e) {
    die(`cannot read the CRD folder ${dir}: ${e.message}`);
  }
  const before = kinds.size;
  for (const file of fs.readdirSync(dir).filter((f) => f.endsWith('.json')).sort()) {
    const schema = JSON.parse(fs.readFileSync(path.join(dir, file), 'utf8'));
    for (const gvk of schema['x-kubernetes-group-version-kind'] || []) {
      kinds.set(`${gvk.group ? `${gvk.group}/` : ''}${gvk.version} ${gvk.kind}`, { schema, validate: null });
    }
  }
  for (const file of files.sort()) {
    for (const d of parseDocuments(fs.readFileSync(file, 'utf8'))) {
      const crd = d.value;
      if (!isMap(crd) || crd.kind !== 'CustomResourceDefinition') continue;
      for (const v of crd.spec.versions || []) {
        if (v.served === false || !v.schema || !v.schema.openAPIV3Schema) continue;
        kinds.set(`${crd.spec.group}/${v.name} ${crd.spec.names.kind}`,
          { schema: v.schema.openAPIV3Schema, validate: null });
      }
    }
  }
  if (kinds.size === before) die(`no CustomResourceDefinition or kind schema in ${dir}`);
}

function schemaProblems(kind, doc) {
  if (!kind.validate) kind.validate = ajv.compile(strictCopy(kind.schema));
  if (kind.validate(doc)) return [];
  const errors = kind.validate.errors;
  // An int-or-string field reports one error per branch of its anyOf: keep the anyOf's.
  const anyOfAt = new Set(errors.filter((e) => e.keyword === 'anyOf').map((e) => e.instancePath));
  const out = [];
  for (const e of errors) {
    if (e.keyword !== 'anyOf' && anyOfAt.has(e.instancePath) && /\/anyOf\/\d+\//.test(e.schemaPath)) continue;
    let where = jsonPointerToPath(e.instancePath);
    let what = e.message;
    if (e.keyword === 'additionalProperties') {
      where = where === '(document)' ? e.params.additionalProperty : at(where, e.params.additionalProperty);
      what = 'unknown field (the schema has no such field)';
    } else if (e.keyword === 'required') {
      where = where === '(document)' ? e.params.missingProperty : at(where, e.params.missingProperty);
      what = 'required';
    } else if (e.keyword === 'enum') {
      what = `must be one of ${e.params.allowedValues.map(q).join(', ')}`;
    } else if (e.keyword === 'anyOf') {
      what = 'must be an integer or a string';
    }
    const line = `${where}: ${what}`;
    if (!out.includes(line)) out.push(line);
  }
  return out;
}

// ------------------------------------------------------------------------------ admission

// metadata.labels / annotations of an object or a pod template (ObjectMeta validation).
function checkMeta(meta, where, p) {
  if (!isMap(meta)) return;
  if (isMap(meta.labels)) {
    for (const [k, v] of Object.entries(meta.labels)) {
      if (!qualifiedKey(k)) p.push(`${where}.labels[${q(k)}]: not a valid label key ([prefix/]name, name at most 63 characters)`);
      if (typeof v !== 'string' || (v !== '' && (v.length > 63 || !QUALIFIED.test(v)))) {
        p.push(`${where}.labels[${q(k)}]: ${q(v)} is not a valid label value (at most 63 characters: alphanumerics, '-', '_', '.', starting and ending with an alphanumeric)`);
      }
    }
  }
  if (isMap(meta.annotations)) {
    for (const [k, v] of Object.entries(meta.annotations)) {
      if (!qualifiedKey(k)) p.push(`${where}.annotations[${q(k)}]: not a valid annotation key`);
      if (typeof v !== 'string') p.push(`${where}.annotations[${q(k)}]: must be a string`);
    }
  }
}
function qualifiedKey(k) {
  const parts = k.split('/');
  if (parts.length > 2) return false;
  const name = parts[parts.length - 1];
  if (parts.length === 2 && !(parts[0].length > 0 && dnsSubdomain(parts[0]))) return false;
  return name.length > 0 && name.length <= 63 && QUALIFIED.test(name);
}

// Volcano's policy rules (the ValidatingAdmissionPolicy checks spec.policies; Volcano's older
// webhook applied the same checks to each task's policies, and they hold there too).
const EVENTS = ['*', 'PodFailed', 'PodEvicted', 'PodPending', 'Unknown', 'TaskCompleted', 'JobUpdated', 'TaskFailed'];
const ACTIONS = ['AbortJob', 'RestartJob', 'RestartTask', 'RestartPod', 'TerminateJob', 'CompleteJob', 'ResumeJob'];
function checkPolicies(list, where, p) {
  if (!Array.isArray(list)) return;
  const events = [];
  const codes = [];
  list.forEach((pol, i) => {
    if (!isMap(pol)) return;
    const w = `${where}[${i}]`;
    const hasEvent = pol.event !== undefined || (Array.isArray(pol.events) && pol.events.length > 0);
    if (pol.event !== undefined && !EVENTS.includes(pol.event)) p.push(`${w}.event: invalid policy event ${q(pol.event)}`);
    if (pol.action !== undefined && !ACTIONS.includes(pol.action)) p.push(`${w}.action: invalid policy action ${q(pol.action)}`);
    if (hasEvent && pol.exitCode !== undefined) p.push(`${w}: must not specify event and exitCode simultaneously`);
    if (!hasEvent && pol.exitCode === undefined) p.push(`${w}: either event or exitCode must be specified`);
    if (pol.exitCode === 0) p.push(`${w}.exitCode: 0 is not a valid error code`);
    if (pol.event !== undefined) events.push(pol.event);
    if (pol.exitCode !== undefined) codes.push(pol.exitCode);
  });
  if (new Set(events).size !== events.length) p.push(`${where}: duplicate policy event`);
  if (new Set(codes).size !== codes.length) p.push(`${where}: duplicate exitCode`);
  if (events.includes('*') && events.length > 1) p.push(`${where}: a '*' event policy must be the only event policy`);
}

// An extended resource (nvidia.com/gpu, vpc.amazonaws.com/efa): a domain outside kubernetes.io.
const extendedResource = (n) => n.includes('/') && !/(^|\.)kubernetes\.io\//.test(n) && !n.startsWith('requests.');

// The pod template of a task (k8s.io/kubernetes pkg/apis/core/validation, the parts a
// generated template can break).
function checkPodTemplate(tmpl, where, p) {
  if (!isMap(tmpl) || !isMap(tmpl.spec)) {
    p.push(`${where}.spec: required`);
    return;
  }
  checkMeta(tmpl.metadata, `${where}.metadata`, p);
  const spec = tmpl.spec;
  const volumes = new Set();
  (Array.isArray(spec.volumes) ? spec.volumes : []).forEach((v, i) => {
    if (!isMap(v)) return;
    if (!dnsLabel(v.name)) p.push(`${where}.spec.volumes[${i}].name: ${q(v.name)} is not a DNS-1123 label`);
    if (volumes.has(v.name)) p.push(`${where}.spec.volumes[${i}].name: volume ${q(v.name)} appears twice`);
    volumes.add(v.name);
  });
  if (spec.restartPolicy !== undefined && !['Always', 'OnFailure', 'Never'].includes(spec.restartPolicy)) {
    p.push(`${where}.spec.restartPolicy: ${q(spec.restartPolicy)} is not Always, OnFailure or Never`);
  }
  if (!Array.isArray(spec.containers) || spec.containers.length === 0) {
    p.push(`${where}.spec.containers: at least one container is required`);
  }
  const claims = new Set();
  (Array.isArray(spec.resourceClaims) ? spec.resourceClaims : []).forEach((c, i) => {
    if (!isMap(c)) return;
    const w = `${where}.spec.resourceClaims[${i}]`;
    if (!dnsLabel(c.name)) p.push(`${w}.name: ${q(c.name)} is not a DNS-1123 label`);
    if (claims.has(c.name)) p.push(`${w}.name: claim ${q(c.name)} appears twice`);
    claims.add(c.name);
    if ((c.resourceClaimName === undefined) === (c.resourceClaimTemplateName === undefined)) {
      p.push(`${w}: exactly one of resourceClaimName and resourceClaimTemplateName is required`);
    }
  });
  const names = new Set();
  for (const field of ['initContainers', 'containers']) {
    (Array.isArray(spec[field]) ? spec[field] : []).forEach((c, ci) => {
      if (!isMap(c)) return;
      const w = `${where}.spec.${field}[${ci}]`;
      if (!dnsLabel(c.name)) p.push(`${w}.name: ${q(c.name)} is not a DNS-1123 label`);
      if (names.has(c.name)) p.push(`${w}.name: container name ${q(c.name)} appears twice in the pod`);
      names.add(c.name);
      if (typeof c.image !== 'string' || c.image === '') p.push(`${w}.image: required`);
      const paths = new Set();
      (Array.isArray(c.volumeMounts) ? c.volumeMounts : []).forEach((m, mi) => {
        if (!isMap(m)) return;
        if (!volumes.has(m.name)) p.push(`${w}.volumeMounts[${mi}].name: no volume ${q(m.name)} in the pod`);
        if (paths.has(m.mountPath)) p.push(`${w}.volumeMounts[${mi}].mountPath: ${q(m.mountPath)} is mounted twice`);
        paths.add(m.mountPath);
      });
      const ports = new Set();
      (Array.isArray(c.ports) ? c.ports : []).forEach((port, pi) => {
        if (!isMap(port)) return;
        const pw = `${w}.ports[${pi}]`;
        if (typeof port.containerPort === 'number' && (port.containerPort < 1 || port.containerPort > 65535)) {
          p.push(`${pw}.containerPort: must be 1-65535`);
        }
        if (port.name !== undefined) {
          const n = port.name;
          if (typeof n !== 'string' || n.length > 15 || !/^[a-z0-9-]+$/.test(n) || !/[a-z]/.test(n) ||
              n.startsWith('-') || n.endsWith('-') || n.includes('--')) {
            p.push(`${pw}.name: ${q(n)} is not an IANA service name (at most 15 of a-z, 0-9, '-'; a letter; no '--')`);
          }
          if (ports.has(n)) p.push(`${pw}.name: port name ${q(n)} appears twice`);
          ports.add(n);
        }
      });
      const res = isMap(c.resources) ? c.resources : {};
      (Array.isArray(res.claims) ? res.claims : []).forEach((cl, i) => {
        if (isMap(cl) && !claims.has(cl.name)) {
          p.push(`${w}.resources.claims[${i}].name: no claim ${q(cl.name)} in the pod's resourceClaims`);
        }
      });
      const limits = isMap(res.limits) ? res.limits : {};
      const requests = isMap(res.requests) ? res.requests : {};
      for (const name of new Set([...Object.keys(limits), ...Object.keys(requests)])) {
        const lim = name in limits ? quantity(limits[name]) : null;
        const req = name in requests ? quantity(requests[name]) : null;
        if (lim !== null && lim < 0) p.push(`${at(`${w}.resources.limits`, name)}: must not be negative`);
        if (req !== null && req < 0) p.push(`${at(`${w}.resources.requests`, name)}: must not be negative`);
        if (lim !== null && req !== null && req > lim) {
          p.push(`${at(`${w}.resources.requests`, name)}: ${requests[name]} is more than the limit ${limits[name]}`);
        }
        if (extendedResource(name)) {
          if ((lim !== null && !Number.isInteger(lim)) || (req !== null && !Number.isInteger(req))) {
            p.push(`${at(`${w}.resources`, name)}: an extended resource must be a whole number`);
          }
          if (req !== null && lim === null) p.push(`${at(`${w}.resources.limits`, name)}: an extended resource with a request needs a limit`);
          if (req !== null && lim !== null && req !== lim) p.push(`${at(`${w}.resources.requests`, name)}: must equal the limit for an extended resource`);
        }
      }
    });
  }
}

// resource.k8s.io/v1 validation (pkg/apis/resource/validation) a schema cannot say.
function admitClaimTemplate(t) {
  const p = [];
  checkMeta(t.metadata, 'metadata', p);
  if (isMap(t.metadata) && !dnsSubdomain(t.metadata.name)) p.push(`metadata.name: ${q(t.metadata.name)} is not a DNS-1123 subdomain`);
  const dev = isMap(t.spec) && isMap(t.spec.spec) && isMap(t.spec.spec.devices) ? t.spec.spec.devices : {};
  const reqs = new Set();
  (Array.isArray(dev.requests) ? dev.requests : []).forEach((r, i) => {
    if (!isMap(r)) return;
    const w = `spec.spec.devices.requests[${i}]`;
    if (!dnsLabel(r.name)) p.push(`${w}.name: ${q(r.name)} is not a DNS-1123 label`);
    if (reqs.has(r.name)) p.push(`${w}.name: request ${q(r.name)} appears twice`);
    reqs.add(r.name);
    if ((r.exactly === undefined) === (r.firstAvailable === undefined)) p.push(`${w}: exactly one of exactly and firstAvailable is required`);
    const ex = isMap(r.exactly) ? r.exactly : null;
    if (ex === null) return;
    if (!dnsSubdomain(ex.deviceClassName)) p.push(`${w}.exactly.deviceClassName: ${q(ex.deviceClassName)} is not a DNS-1123 subdomain`);
    const mode = ex.allocationMode === undefined ? 'ExactCount' : ex.allocationMode;
    if (!['All', 'ExactCount'].includes(mode)) p.push(`${w}.exactly.allocationMode: ${q(mode)} is not All or ExactCount`);
    if (mode === 'All' && ex.count !== undefined) p.push(`${w}.exactly.count: must not be set with allocationMode All`);
    if (mode === 'ExactCount' && ex.count !== undefined && !(ex.count > 0)) p.push(`${w}.exactly.count: must be greater than zero`);
  });
  for (const field of ['constraints', 'config']) {
    (Array.isArray(dev[field]) ? dev[field] : []).forEach((c, i) => {
      (isMap(c) && Array.isArray(c.requests) ? c.requests : []).forEach((n, j) => {
        if (!reqs.has(n)) p.push(`spec.spec.devices.${field}[${i}].requests[${j}]: no request ${q(n)} in the claim`);
      });
    });
  }
  return p;
}

// networking.k8s.io/v1 NetworkPolicy validation (pkg/apis/networking/validation) in brief.
function admitNetworkPolicy(np) {
  const p = [];
  checkMeta(np.metadata, 'metadata', p);
  if (isMap(np.metadata) && !dnsSubdomain(np.metadata.name)) p.push(`metadata.name: ${q(np.metadata.name)} is not a DNS-1123 subdomain`);
  const spec = isMap(np.spec) ? np.spec : {};
  (Array.isArray(spec.policyTypes) ? spec.policyTypes : []).forEach((t, i) => {
    if (!['Ingress', 'Egress'].includes(t)) p.push(`spec.policyTypes[${i}]: ${q(t)} is not Ingress or Egress`);
  });
  (Array.isArray(spec.ingress) ? spec.ingress : []).forEach((r, i) => {
    (isMap(r) && Array.isArray(r.ports) ? r.ports : []).forEach((port, j) => {
      const w = `spec.ingress[${i}].ports[${j}]`;
      if (isMap(port) && typeof port.port === 'number' && (port.port < 1 || port.port > 65535)) p.push(`${w}.port: must be 1-65535`);
      if (isMap(port) && port.protocol !== undefined && !['TCP', 'UDP', 'SCTP'].includes(port.protocol)) p.push(`${w}.protocol: ${q(port.protocol)} is not TCP, UDP or SCTP`);
    });
  });
  return p;
}

const PLUGINS = ['ssh', 'env', 'svc', 'tensorflow', 'mpi', 'pytorch', 'hcclrank', 'ray'];

function admitJob(job) {
  const p = [];
  const meta = isMap(job.metadata) ? job.metadata : {};
  const spec = isMap(job.spec) ? job.spec : {};
  const name = meta.name;
  if (typeof name !== 'string' || name === '') {
    if (meta.generateName === undefined) p.push('metadata.name: required');
  } else {
    if (!dnsSubdomain(name)) p.push(`metadata.name: ${q(name)} is not a DNS-1123 subdomain`);
    if (name.length > 63 || !QUALIFIED.test(name)) p.push(`metadata.name: ${q(name)} is not a qualified name of at most 63 characters`);
    if (isMap(spec.plugins) && 'svc' in spec.plugins && !LABEL_1035.test(name)) {
      p.push(`metadata.name: ${q(name)} must be a DNS-1035 label (start with a letter): the svc plugin names a Service after the job`);
    }
  }
  if (meta.namespace !== undefined && !dnsLabel(meta.namespace)) p.push(`metadata.namespace: ${q(meta.namespace)} is not a DNS-1123 label`);
  checkMeta(meta, 'metadata', p);

  if (typeof spec.minAvailable === 'number' && spec.minAvailable < 0) p.push("spec.minAvailable: job 'minAvailable' must be >= 0");
  if (typeof spec.maxRetry === 'number' && spec.maxRetry < 0) p.push("spec.maxRetry: 'maxRetry' cannot be less than zero");
  if (typeof spec.ttlSecondsAfterFinished === 'number' && spec.ttlSecondsAfterFinished < 0) {
    p.push("spec.ttlSecondsAfterFinished: cannot be less than zero");
  }
  const tasks = Array.isArray(spec.tasks) ? spec.tasks : [];
  if (tasks.length === 0) p.push('spec.tasks: no task specified in the job spec');
  const taskNames = new Set();
  let replicas = 0;
  tasks.forEach((t, i) => {
    if (!isMap(t)) return;
    const w = `spec.tasks[${i}]`;
    const n = typeof t.replicas === 'number' ? t.replicas : 0;
    replicas += n;
    if (!dnsLabel(t.name)) p.push(`${w}.name: ${q(t.name)} is not a DNS-1123 label`);
    if (taskNames.has(t.name)) p.push(`${w}.name: duplicated task name ${q(t.name)}`);
    taskNames.add(t.name);
    // The svc plugin gives each pod the hostname <job>-<task>-<index>: a DNS label.
    if (typeof name === 'string' && typeof t.name === 'string') {
      const host = `${name}-${t.name}-${Math.max(n - 1, 0)}`;
      if (!dnsLabel(host)) p.push(`${w}.name: the pod hostname ${q(host)} (job-task-index) is longer than 63 characters or not a DNS label`);
    }
    if (n < 0) p.push(`${w}.replicas: 'replicas' < 0 in task`);
    if (typeof t.minAvailable === 'number') {
      if (t.minAvailable < 0) p.push(`${w}.minAvailable: 'minAvailable' < 0 in task`);
      if (t.minAvailable > n) p.push(`${w}.minAvailable: 'minAvailable' (${t.minAvailable}) is greater than 'replicas' (${n}) in task`);
    }
    checkPolicies(t.policies, `${w}.policies`, p);
    checkPodTemplate(t.template, `${w}.template`, p);
  });
  if (typeof spec.minAvailable === 'number' && spec.minAvailable > replicas) {
    p.push(`spec.minAvailable: job 'minAvailable' (${spec.minAvailable}) is greater than the total replicas of the tasks (${replicas})`);
  }
  checkPolicies(spec.policies, 'spec.policies', p);
  if (isMap(spec.plugins)) {
    for (const plugin of Object.keys(spec.plugins)) {
      if (!PLUGINS.includes(plugin)) p.push(`spec.plugins[${q(plugin)}]: no such job plugin (known: ${PLUGINS.join(', ')})`);
    }
  }
  const mountPaths = new Set();
  (Array.isArray(spec.volumes) ? spec.volumes : []).forEach((v, i) => {
    if (!isMap(v)) return;
    if (!v.mountPath) p.push(`spec.volumes[${i}].mountPath: required`);
    else if (mountPaths.has(v.mountPath)) p.push(`spec.volumes[${i}].mountPath: duplicated mountPath ${q(v.mountPath)}`);
    mountPaths.add(v.mountPath);
    if (!v.volumeClaimName && !v.volumeClaim) p.push(`spec.volumes[${i}]: either volumeClaim or volumeClaimName must be specified`);
  });
  return p;
}

// A JobSet's create-time rules (JobSet v0.9.1's validating webhook and the CRD's CEL rules,
// jobset-v0.9.1/SOURCE.md), batch/v1's rules for the Jobs it makes, and each pod template's.
const LABEL_1035_MAX = (s) => typeof s === 'string' && s.length <= 63 && LABEL_1035.test(s);
function admitJobSet(js) {
  const p = [];
  const meta = isMap(js.metadata) ? js.metadata : {};
  const spec = isMap(js.spec) ? js.spec : {};
  const name = typeof meta.name === 'string' ? meta.name : '';
  if (!dnsSubdomain(name)) p.push(`metadata.name: ${q(meta.name)} is not a DNS-1123 subdomain`);
  if (meta.namespace !== undefined && !dnsLabel(meta.namespace)) p.push(`metadata.namespace: ${q(meta.namespace)} is not a DNS-1123 label`);
  checkMeta(meta, 'metadata', p);
  const rjobs = Array.isArray(spec.replicatedJobs) ? spec.replicatedJobs : [];
  if (rjobs.length === 0) p.push('spec.replicatedJobs: at least one replicated job is required');
  const net = isMap(spec.network) ? spec.network : {};
  if (net.subdomain !== undefined && !(dnsSubdomain(net.subdomain) && LABEL_1035_MAX(net.subdomain))) {
    p.push(`spec.network.subdomain: ${q(net.subdomain)} is not a DNS-1123 subdomain and DNS-1035 label`);
  }
  const seen = [];
  rjobs.forEach((rj, i) => {
    if (!isMap(rj)) return;
    const w = `spec.replicatedJobs[${i}]`;
    const replicas = typeof rj.replicas === 'number' ? rj.replicas : 1;
    const jspec = isMap(rj.template) && isMap(rj.template.spec) ? rj.template.spec : {};
    if (!LABEL_1035_MAX(rj.groupName === undefined ? 'default' : rj.groupName)) p.push(`${w}.groupName: ${q(rj.groupName)} is not a DNS-1035 label`);
    const jobName = `${name}-${rj.name}-${Math.max(replicas - 1, 0)}`;
    if (!LABEL_1035_MAX(jobName)) p.push(`${w}.name: the Job name ${q(jobName)} (jobset-rjob-index) is not a DNS-1035 label of at most 63 characters`);
    if (jspec.completionMode === 'Indexed' && typeof jspec.completions === 'number') {
      const pod = `${name}-${rj.name}-${Math.max(replicas - 1, 0)}-${Math.max(jspec.completions - 1, 0)}-abcde`;
      if (!LABEL_1035_MAX(pod)) p.push(`${w}.name: the pod name ${q(pod)} (jobset-rjob-job-pod-random) is not a DNS-1035 label of at most 63 characters`);
    }
    if (jspec.completionMode === 'Indexed' && typeof jspec.completions !== 'number') p.push(`${w}.template.spec.completions: required with completionMode Indexed`);
    if (typeof jspec.backoffLimit === 'number' && jspec.backoffLimit < 0) p.push(`${w}.template.spec.backoffLimit: must be >= 0`);
    if ((typeof jspec.parallelism === 'number' ? jspec.parallelism : 1) * replicas > 2147483647) p.push(`${w}: the product of replicas and parallelism must not exceed 2147483647`);
    if (Array.isArray(rj.dependsOn)) {
      if (i === 0) p.push(`${w}.dependsOn: DependsOn can't be set for the first ReplicatedJob`);
      else if (!seen.includes(rj.dependsOn[0] && rj.dependsOn[0].name)) p.push(`${w}.dependsOn: replicatedJob ${rj.name} cannot depend on replicatedJob ${q(rj.dependsOn[0] && rj.dependsOn[0].name)}`);
      if (isMap(spec.startupPolicy) && spec.startupPolicy.startupPolicyOrder === 'InOrder') p.push(`${w}.dependsOn: StartupPolicy and DependsOn APIs are mutually exclusive`);
    }
    seen.push(rj.name);
    const tmpl = isMap(jspec.template) ? jspec.template : null;
    const rp = tmpl && isMap(tmpl.spec) ? tmpl.spec.restartPolicy : undefined;
    if (rp !== 'OnFailure' && rp !== 'Never') p.push(`${w}.template.spec.template.spec.restartPolicy: a Job's pods restart OnFailure or Never, got ${q(rp)}`);
    checkPodTemplate(tmpl, `${w}.template.spec.template`, p);
  });
  const targets = (isMap(spec.successPolicy) && spec.successPolicy.targetReplicatedJobs) || [];
  for (const t of targets) if (!seen.includes(t)) p.push(`spec.successPolicy.targetReplicatedJobs: invalid replicatedJob name ${q(t)} does not appear in .spec.replicatedJobs`);
  const rules = (isMap(spec.failurePolicy) && spec.failurePolicy.rules) || [];
  rules.forEach((r, i) => {
    for (const t of (isMap(r) && r.targetReplicatedJobs) || []) if (!seen.includes(t)) p.push(`spec.failurePolicy.rules[${i}]: replicatedJob ${q(t)} does not appear in .spec.replicatedJobs`);
    if (isMap(r) && !/^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$/.test(r.name || '')) p.push(`spec.failurePolicy.rules[${i}].name: invalid failure policy rule name ${q(r.name)}`);
  });
  return p;
}

// ------------------------------------------------------------------------------ main

let documents = 0;
let invalid = 0;
function report(label, problems) {
  documents++;
  if (problems.length === 0) {
    if (!args.quiet) process.stdout.write(`${label}: valid\n`);
    return;
  }
  invalid++;
  process.stdout.write(`${label}: INVALID\n`);
  for (const problem of problems) process.stdout.write(`  - ${problem}\n`);
}

for (const file of args.files) {
  let docs;
  try {
    docs = parseDocuments(fs.readFileSync(file === '-' ? 0 : file, 'utf8'));
  } catch (e) {
    report(file, [`cannot read: ${e.message}`]);
    continue;
  }
  if (docs.length === 0) report(file, ['no document in the file']);
  docs.forEach((d, i) => {
    if (d.error) {
      report(`${file}#${i + 1}`, [`not YAML: ${d.error}`]);
      return;
    }
    const doc = d.value;
    const label = `${file}#${i + 1} ${isMap(doc) ? `${doc.kind}/${isMap(doc.metadata) ? doc.metadata.name : '?'}` : ''}`;
    if (!isMap(doc) || typeof doc.apiVersion !== 'string' || typeof doc.kind !== 'string') {
      report(label, ['apiVersion and kind: required']);
      return;
    }
    const kind = kinds.get(`${doc.apiVersion} ${doc.kind}`);
    if (!kind) {
      report(label, [`no CRD in ${args.crds} serves ${doc.apiVersion} ${doc.kind}`]);
      return;
    }
    const problems = schemaProblems(kind, doc);
    const admit = { Job: admitJob, JobSet: admitJobSet, ResourceClaimTemplate: admitClaimTemplate,
      NetworkPolicy: admitNetworkPolicy }[doc.kind] || null;
    if (admit) {
      for (const problem of admit(doc)) if (!problems.includes(problem)) problems.push(problem);
    }
    report(label, problems);
  });
}
process.stdout.write(`${documents} document(s): ${documents - invalid} valid, ${invalid} invalid\n`);
process.exit(invalid === 0 ? 0 : 1);
