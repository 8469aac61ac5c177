// docs/openapi.yaml against third-party tools (node:test; run by CTest):
//   - OpenApiDocument: @seriousme/openapi-schema-validator accepts the YAML and the JSON the
//     build makes of it (the one GET /openapi.json answers) as OpenAPI 3.1;
//   - OpenApiAnswers: every answer the HTTP conformance run got (tests/support/answer_recorder.h
//     writes them to DELAYQ_ANSWERS_DIR) matches the schema the document gives for its route and
//     status, checked by Ajv (JSON Schema 2020-12, OpenAPI 3.1's dialect); so does each JSON
//     request body the client sent.
// Environment: DELAYQ_OPENAPI_TOOLS (node_modules, scripts/openapi-tools.sh), DELAYQ_OPENAPI_YAML,
// DELAYQ_OPENAPI_JSON, DELAYQ_ANSWERS_DIR.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

const tools = process.env.DELAYQ_OPENAPI_TOOLS;
const require = createRequire(join(tools, 'noop.js'));
const { Validator } = await import(pathToFileURL(join(tools, '@seriousme/openapi-schema-validator/index.js')));
const Ajv2020 = require('ajv/dist/2020').default;
const doc = JSON.parse(readFileSync(process.env.DELAYQ_OPENAPI_JSON, 'utf8'));

test('the document is valid OpenAPI 3.1, as YAML and as the JSON the server answers', async () => {
  for (const source of [process.env.DELAYQ_OPENAPI_YAML, process.env.DELAYQ_OPENAPI_JSON]) {
    const validator = new Validator();
    const result = await validator.validate(source);
    assert.equal(result.valid, true, `${source}: ${JSON.stringify(result.errors, null, 1)}`);
    assert.equal(validator.version, '3.1');
  }
  // And a broken one is refused (the validator can fail).
  const broken = structuredClone(doc);
  broken.paths['/v1/queues'].get.responses = 'none';
  const result = await new Validator().validate(broken);
  assert.equal(result.valid, false);
});

// The route template of a request target, and its path parameters: "/v1/queues/o/jobs/01J..."
// -> "/v1/queues/{q}/jobs/{id}".
const templates = Object.keys(doc.paths).map((template) => {
  const parts = template.split('/');
  return { template, parts };
});
function routeOf(target) {
  const path = target.split('?')[0];
  const segments = path.split('/');
  for (const { template, parts } of templates) {
    if (parts.length !== segments.length) continue;
    if (parts.every((p, i) => (p.startsWith('{') && segments[i] !== '') || p === segments[i])) return template;
  }
  return null;
}

// A JSON pointer into the document, as Ajv takes a $ref to it.
const pointer = (...segments) => '#' + segments.map((s) => '/' + encodeURIComponent(String(s).replaceAll('~', '~0').replaceAll('/', '~1'))).join('');

test('every answer the HTTP conformance run saw matches its route and status in the document', () => {
  const ajv = new Ajv2020({ strict: false, allErrors: true });
  ajv.addSchema(doc, 'openapi');
  const dir = process.env.DELAYQ_ANSWERS_DIR;
  const files = readdirSync(dir).filter((f) => f.endsWith('.jsonl'));
  assert.ok(files.length > 0, `no recorded answers in ${dir}: the HTTP conformance run records them`);
  const seen = new Map();  // "METHOD template status" -> count
  const failures = [];
  let answers = 0;
  for (const file of files) {
    for (const line of readFileSync(join(dir, file), 'utf8').split('\n')) {
      if (!line) continue;
      const a = JSON.parse(line);
      answers++;
      const template = routeOf(a.target);
      const method = a.method.toLowerCase();
      const operation = template && doc.paths[template][method];
      if (!operation) {
        failures.push(`${a.method} ${a.target}: no such route in the document`);
        continue;
      }
      const status = String(a.status);
      const key = operation.responses[status] ? status : 'default';
      if (!operation.responses[key]) {
        failures.push(`${a.method} ${template}: status ${status} is not in the document`);
        continue;
      }
      seen.set(`${a.method} ${template} ${status}`, (seen.get(`${a.method} ${template} ${status}`) ?? 0) + 1);
      let response = operation.responses[key];
      let responsePath = ['paths', template, method, 'responses', key];
      if (response.$ref) {  // a shared response: #/components/responses/X
        responsePath = response.$ref.slice(2).split('/');
        response = responsePath.reduce((o, k) => o[k], doc);
      }
      const json = response.content?.['application/json'];
      if (!json) continue;  // text: the dashboard, /metrics
      const check = (value, schemaPath, what) => {
        const validate = ajv.getSchema('openapi' + pointer(...schemaPath));
        if (!validate(value)) {
          failures.push(`${a.method} ${a.target.slice(0, 120)} ${status} ${what}: ${ajv.errorsText(validate.errors)}\n  ${JSON.stringify(value).slice(0, 400)}`);
        }
      };
      let body;
      try {
        body = JSON.parse(a.body);
      } catch {
        failures.push(`${a.method} ${a.target} ${status}: the answer is not JSON: ${a.body.slice(0, 200)}`);
        continue;
      }
      check(body, [...responsePath, 'content', 'application/json', 'schema'], 'answer');
      const request = operation.requestBody;
      if (a.request && request) {
        const requestPath = request.$ref ? request.$ref.slice(2).split('/') : ['paths', template, method, 'requestBody'];
        let parsed;
        try { parsed = JSON.parse(a.request); } catch { parsed = undefined; }
        // Bodies that tests send malformed on purpose are the server's to refuse, not the document's.
        if (parsed !== undefined && a.status < 400) check(parsed, [...requestPath, 'content', 'application/json', 'schema'], 'request');
      }
    }
  }
  assert.deepEqual(failures.slice(0, 20), [], `${failures.length} of ${answers} answers do not match docs/openapi.yaml`);
  // The run covers the API: each of these was answered and checked at least once.
  for (const want of ['POST /v1/queues/{q}/jobs 201', 'POST /v1/queues/{q}/jobs 200', 'GET /v1/queues/{q}/jobs/{id} 200',
    'GET /v1/queues/{q}/jobs 200', 'POST /v1/queues/{q}/reserve 200', 'POST /v1/queues/{q}/ack 200',
    'POST /v1/queues/{q}/nack 200', 'POST /v1/queues/{q}/touch 200', 'GET /v1/queues/{q}/dead 200',
    'POST /v1/queues/{q}/dead/replay 200', 'DELETE /v1/queues/{q}/dead 200', 'GET /v1/queues/{q} 200',
    'GET /v1/queues 200', 'PUT /v1/queues/{q}/config 200', 'GET /v1/queues/{q}/config 200',
    'GET /v1/queues/{q}/schedule 200', 'POST /v1/queues/{q}/pause 200', 'DELETE /v1/queues/{q} 200',
    'PATCH /v1/queues/{q}/jobs/{id} 200', 'DELETE /v1/queues/{q}/jobs/{id} 200', 'GET /v1/queues/{q} 404',
    'POST /v1/queues/{q}/jobs 400', 'POST /v1/queues/{q}/ack 409']) {
    assert.ok(seen.has(want), `the conformance run never got ${want}; seen: ${[...seen.keys()].sort().join(', ')}`);
  }
});
