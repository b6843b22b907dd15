/**
 * How a server's tool results are checked against the output schemas it lists. The SDK's
 * client checks every result of a tool with an `outputSchema` before handing it back, with
 * an Ajv of its own on JavaScript's backtracking regular expressions; a result can echo
 * what the model sent, so a server's `pattern` would meet model-chosen text on the main
 * thread. This checker is the SDK's, on the linear-time engine (runtime/linear-regex.ts).
 *
 * Formats are not checked (2020-12 reads them as annotations): their matchers are
 * regular expressions too, and a result's shape is all the harness needs from the check.
 */
import type {
  JsonSchemaType,
  JsonSchemaValidator,
  jsonSchemaValidator,
} from '@modelcontextprotocol/sdk/validation/index.js';
import { Ajv, type ValidateFunction } from 'ajv';
import { ajvRegExp, LINEAR_PATTERN_ADVICE, LinearPatternError } from '../runtime/linear-regex.js';

export class LinearOutputSchemas implements jsonSchemaValidator {
  readonly #ajv = new Ajv({
    strict: false,
    validateSchema: false,
    validateFormats: false,
    allErrors: true,
    code: { regExp: ajvRegExp },
  });

  getValidator<T>(schema: JsonSchemaType): JsonSchemaValidator<T> {
    let validate: ValidateFunction;
    try {
      const id = (schema as { $id?: unknown }).$id;
      validate =
        typeof id === 'string' ? (this.#ajv.getSchema(id) ?? this.#ajv.compile(schema)) : this.#ajv.compile(schema);
    } catch (error) {
      if (!(error instanceof LinearPatternError)) throw error;
      // The server's other tools stay usable; each call of this one says why its results cannot be taken.
      const errorMessage = `its output schema cannot be checked: ${error.message}. ${LINEAR_PATTERN_ADVICE} (in the server's outputSchema)`;
      return () => ({ valid: false, data: undefined, errorMessage });
    }
    return (input) =>
      validate(input)
        ? { valid: true, data: input as T, errorMessage: undefined }
        : { valid: false, data: undefined, errorMessage: this.#ajv.errorsText(validate.errors) };
  }
}
