/**
 * Validation of tool arguments against the small, closed JSON Schema subset the
 * built-in tools declare: an object of typed properties (string, number, integer,
 * boolean, array, nested object), `items`, `minItems`, `maxItems`, `required`, `additionalProperties: false`,
 * `minimum`, `exclusiveMinimum`, `minLength` and `maxLength`. No string argument may hold a NUL character:
 * no tool has a use for one (the file tools work on text, and the file system and `exec` cannot take one). It lives in every agent thread, so it is a few
 * dozen lines rather than a schema compiler: a thread pays for every module it loads
 * when it starts (see docs/ARCHITECTURE.md, "Thread start cost").
 */

export interface ArgumentSchema {
  type: 'object' | 'string' | 'number' | 'integer' | 'boolean' | 'array';
  description?: string;
  properties?: Record<string, ArgumentSchema>;
  required?: string[];
  additionalProperties?: false;
  minimum?: number;
  exclusiveMinimum?: number;
  minLength?: number;
  /** The most characters a string may have: the limit the tool states to the model. */
  maxLength?: number;
  /** For strings: the only values taken. */
  enum?: readonly string[];
  /** For arrays: the schema of every item, and the fewest items. */
  items?: ArgumentSchema;
  minItems?: number;
  maxItems?: number;
}

/** Every problem with `value`, as `path: what is wrong`; empty when it is valid. */
export function checkArguments(schema: ArgumentSchema, value: unknown, path = '(arguments)'): string[] {
  switch (schema.type) {
    case 'object': {
      if (typeof value !== 'object' || value === null || Array.isArray(value)) return [`${path}: must be an object`];
      const record = value as Record<string, unknown>;
      const problems: string[] = [];
      const properties = schema.properties ?? {};
      for (const name of schema.required ?? []) {
        if (record[name] === undefined) problems.push(`${join(path, name)}: is required`);
      }
      for (const [name, item] of Object.entries(record)) {
        const property = properties[name];
        if (!property) {
          if (schema.additionalProperties === false)
            problems.push(`${join(path, name)}: is not an argument of this tool`);
          continue;
        }
        if (item !== undefined) problems.push(...checkArguments(property, item, join(path, name)));
      }
      return problems;
    }
    case 'string':
      if (typeof value !== 'string') return [`${path}: must be a string`];
      if (schema.minLength !== undefined && value.length < schema.minLength) {
        return [`${path}: must be at least ${schema.minLength} character${schema.minLength === 1 ? '' : 's'} long`];
      }
      if (schema.maxLength !== undefined && value.length > schema.maxLength) {
        return [`${path}: is ${value.length} characters long, above this tool's limit of ${schema.maxLength}`];
      }
      if (schema.enum && !schema.enum.includes(value)) {
        return [
          `${path}: is ${JSON.stringify(value)}; use one of ${schema.enum.map((v) => JSON.stringify(v)).join(', ')}`,
        ];
      }
      if (value.includes('\0')) {
        return [
          `${path}: contains a NUL character (\\u0000), which no path, command or text file can hold; send the text without it`,
        ];
      }
      return [];
    case 'boolean':
      return typeof value === 'boolean' ? [] : [`${path}: must be true or false`];
    case 'array': {
      if (!Array.isArray(value)) return [`${path}: must be an array`];
      if (schema.minItems !== undefined && value.length < schema.minItems) {
        return [`${path}: must hold at least ${schema.minItems} item${schema.minItems === 1 ? '' : 's'}`];
      }
      if (schema.maxItems !== undefined && value.length > schema.maxItems) {
        return [`${path}: holds ${value.length} items, above this tool's limit of ${schema.maxItems}`];
      }
      const items = schema.items;
      return items ? value.flatMap((item, index) => checkArguments(items, item, `${path}[${index}]`)) : [];
    }
    case 'number':
    case 'integer': {
      if (typeof value !== 'number' || !Number.isFinite(value)) return [`${path}: must be a number`];
      if (schema.type === 'integer' && !Number.isInteger(value)) return [`${path}: must be a whole number`];
      if (schema.minimum !== undefined && value < schema.minimum)
        return [`${path}: must be at least ${schema.minimum}`];
      if (schema.exclusiveMinimum !== undefined && value <= schema.exclusiveMinimum) {
        return [`${path}: must be more than ${schema.exclusiveMinimum}`];
      }
      return [];
    }
  }
}

function join(path: string, name: string): string {
  // A name the model made up can be any length: an observation shows its start.
  const shown = name.length > 100 ? `${name.slice(0, 100)}…` : name;
  return path === '(arguments)' ? shown : `${path}.${shown}`;
}
