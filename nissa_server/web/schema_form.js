// Forms built from a JSON Schema (the server's /openapi.json): a field per property, and the schema's own
// rules checked before a body is sent (types, bounds, patterns, required fields, the anyOf of cross-field rules),
// so the page refuses what the server would, in words. Nothing here knows one command from another.
"use strict";

// The schema of a property, its null branch set aside: {schema, optional}.
function nonNull(prop) {
  const branches = prop.anyOf ? prop.anyOf.filter((b) => b.type !== "null") : [prop];
  return {schema: branches.length === 1 ? branches[0] : {anyOf: branches}, optional: !!prop.anyOf && branches.length < prop.anyOf.length};
}

// Why `value` is not what `schema` allows (a sentence), or null: its own rules, then its anyOf (the cross-field
// rules name their branches: "needs one of: N epochs; Through the next PPO update").
function schemaRefusal(schema, value, where = "") {
  const own = ownRefusal(schema, value, where);
  if (own || !schema.anyOf) return own;
  const whys = schema.anyOf.map((b) => schemaRefusal(b, value, where));
  if (whys.includes(null)) return null;
  const titled = schema.anyOf.map((b) => b.title).filter(Boolean);
  return titled.length === schema.anyOf.length ? `needs one of: ${titled.join("; ")}` : whys[0];
}

function ownRefusal(schema, value, where) {
  const at = where ? `'${where}' ` : "";
  if ("const" in schema && value !== schema.const) return `${at}must be ${JSON.stringify(schema.const)}`;
  if (schema.not && schemaRefusal(schema.not, value, where) === null) return `${at}must not be ${JSON.stringify(value)}`;
  if (schema.enum && !schema.enum.includes(value)) return `${at}must be one of ${schema.enum.map((v) => JSON.stringify(v)).join(", ")}`;
  const type = schema.type;
  if (type === "null" && value !== null) return `${at}must be empty`;
  if (type === "integer" && !Number.isInteger(value)) return `${at}must be a whole number`;
  if (type === "number" && !Number.isFinite(value)) return `${at}must be a number`;
  if (type === "boolean" && typeof value !== "boolean") return `${at}must be true or false`;
  if (type === "string" && typeof value !== "string") return `${at}must be text`;
  if (typeof value === "number") {
    if (schema.minimum != null && value < schema.minimum) return `${at}must be at least ${schema.minimum}`;
    if (schema.maximum != null && value > schema.maximum) return `${at}must be at most ${schema.maximum}`;
  }
  if (typeof value === "string") {
    if (schema.minLength != null && value.length < schema.minLength) return `${at}must not be empty`;
    if (schema.maxLength != null && value.length > schema.maxLength) return `${at}must be at most ${schema.maxLength} characters`;
    if (schema.pattern && !new RegExp(schema.pattern.replace(/\(\?!\\n\)$/, ""), "u").test(value)) return `${at}is not of the form this field takes`;
  }
  if (type === "object" || schema.properties || schema.required) return objectRefusal(schema, value, at);
  return null;
}

function objectRefusal(schema, body, at = "") {
  if (body === null || typeof body !== "object" || Array.isArray(body)) return `${at}must be an object`;
  const keys = Object.keys(body);
  if (schema.minProperties != null && keys.length < schema.minProperties) return `${at}needs at least ${schema.minProperties} entr${schema.minProperties > 1 ? "ies" : "y"}`;
  if (schema.maxProperties != null && keys.length > schema.maxProperties) return `${at}takes at most ${schema.maxProperties} entries`;
  for (const key of schema.required || []) if (!(key in body)) return `${at}needs '${key}'`;
  for (const [key, value] of Object.entries(body)) {
    if (schema.propertyNames && schemaRefusal(schema.propertyNames, key)) return `${at}'${key}' is not a name it takes`;
    const prop = (schema.properties || {})[key] || (typeof schema.additionalProperties === "object" ? schema.additionalProperties : null);
    if (!prop) { if (schema.additionalProperties === false) return `${at}takes no '${key}'`; continue; }
    const why = schemaRefusal(prop, value, key);
    if (why) return at + why;
  }
  return null;
}

// A labelled input for one property (`name`), or null for a property the form does not ask for.
function schemaField(name, prop, {choices = null, help = ""} = {}) {
  const {schema, optional} = nonNull(prop);
  let input;
  if (choices || schema.enum) {
    const values = choices || schema.enum;
    input = el("select", {name});
    input.append(...(optional ? [el("option", {value: ""}, "—")] : []), ...values.map((v) => el("option", {value: v}, v)));
  } else if (schema.type === "boolean") {
    input = el("input", {type: "checkbox", name});
  } else if (schema.type === "integer" || schema.type === "number") {
    input = el("input", {type: "number", name, step: schema.type === "integer" ? "1" : "any"});
    if (schema.minimum != null) input.min = String(schema.minimum);
    if (schema.maximum != null) input.max = String(schema.maximum);
    input.placeholder = schema.minimum != null && schema.maximum != null ? `${schema.minimum}–${schema.maximum}` : "";
  } else if (schema.type === "object") {  // a map of names to values, written as the console takes it: lr=0.01 wd=0
    input = el("input", {type: "text", name, size: 28, placeholder: "name=value name=value"});
  } else {
    input = el("input", {type: "text", name, size: 18});
    if (schema.maxLength != null) input.maxLength = schema.maxLength;
  }
  input.dataset.kind = schema.type || (schema.enum ? "enum" : "string");
  input.required = !optional && input.type !== "checkbox" && prop.default === undefined;
  const label = el("label", {title: help || prop.description || ""}, name.replace(/_/g, " "), " ", input);
  if (help) label.append(el("span", {className: "help"}, help));
  return label;
}

// The value a field holds, typed as its schema says; undefined where it is left empty (the body omits it).
function fieldValue(input) {
  if (input.type === "checkbox") return input.checked || undefined;
  const raw = input.value.trim();
  if (raw === "") return undefined;
  if (input.dataset.kind === "integer" || input.dataset.kind === "number") return Number(raw);
  if (input.dataset.kind === "object") return namedValues(raw);
  return raw;
}

// "lr=0.01 name=big warm=true" as {lr: 0.01, name: "big", warm: true}: a number where it reads as one, true and
// false as such, else the text; a word without "=" is kept as the text it is (the schema then says why not).
function namedValues(raw) {
  const out = {};
  for (const word of raw.split(/\s+/).filter(Boolean)) {
    const at = word.indexOf("=");
    if (at < 1) return raw;
    const key = word.slice(0, at), text = word.slice(at + 1);
    out[key] = text === "true" ? true : text === "false" ? false : text !== "" && Number.isFinite(Number(text)) ? Number(text) : text;
  }
  return out;
}
