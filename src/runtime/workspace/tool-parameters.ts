/**
 * The argument schemas the model sees for each file tool, and what each tool does in a
 * sentence. The ceilings in them are the ones the operations hold to (./limits.ts), so a
 * call above one is refused before it runs.
 */
import type { ArgumentSchema } from '../arguments.js';
import { MAX_PATH_CHARS, MAX_PATTERN_CHARS, MAX_WRITE_BYTES } from './limits.js';

const pathProperty = (what: string): ArgumentSchema => ({
  type: 'string',
  minLength: 1,
  maxLength: MAX_PATH_CHARS,
  description: `${what} Relative to the workspace root (absolute paths inside it work too). At most ${MAX_PATH_CHARS} characters.`,
});

/** A text argument a write carries, up to {@link MAX_WRITE_BYTES} characters. */
const textProperty = (description: string, minLength?: number): ArgumentSchema => ({
  type: 'string',
  ...(minLength === undefined ? {} : { minLength }),
  maxLength: MAX_WRITE_BYTES,
  description: `${description} At most ${MAX_WRITE_BYTES} characters.`,
});

/** A search pattern, up to {@link MAX_PATTERN_CHARS} characters. */
const patternProperty = (description: string): ArgumentSchema => ({
  type: 'string',
  minLength: 1,
  maxLength: MAX_PATTERN_CHARS,
  description: `${description} At most ${MAX_PATTERN_CHARS} characters.`,
});

/** The argument schemas of the file tools. */
export const FILE_TOOL_PARAMETERS: Record<
  'read_file' | 'write_file' | 'edit_file' | 'patch_file' | 'grep' | 'find',
  ArgumentSchema
> = {
  read_file: {
    type: 'object',
    properties: {
      path: pathProperty('The file to read.'),
      start_line: {
        type: 'integer',
        minimum: 1,
        description: 'First line to return, counting from 1. Give a range to read a file above the read ceiling.',
      },
      end_line: {
        type: 'integer',
        minimum: 1,
        description: 'Last line to return, inclusive; past the end means to the end.',
      },
    },
    required: ['path'],
    additionalProperties: false,
  },
  write_file: {
    type: 'object',
    properties: {
      path: pathProperty('The file to write; it and its parent directories are created if missing.'),
      content: textProperty('The whole new content of the file, exactly.'),
    },
    required: ['path', 'content'],
    additionalProperties: false,
  },
  edit_file: {
    type: 'object',
    properties: {
      path: pathProperty('The file to edit; it must exist.'),
      old_string: textProperty(
        'The exact text to replace, including whitespace and indentation; it must occur exactly once in the file, so include enough surrounding lines to make it unique.',
        1,
      ),
      new_string: textProperty('The text to put in its place (empty to delete it).'),
    },
    required: ['path', 'old_string', 'new_string'],
    additionalProperties: false,
  },
  patch_file: {
    type: 'object',
    properties: {
      path: pathProperty('The file the patch changes.'),
      patch: textProperty(
        'A unified diff for this one file: hunks starting "@@ -a,b +c,d @@" with lines beginning " " (context), "-" (removed) or "+" (added). "---"/"+++" header lines are optional; use "--- /dev/null" to create a file.',
        1,
      ),
    },
    required: ['path', 'patch'],
    additionalProperties: false,
  },
  grep: {
    type: 'object',
    properties: {
      pattern: patternProperty('A JavaScript regular expression, matched line by line.'),
      path: pathProperty('The directory (or file) to search; the whole workspace when omitted.'),
      glob: patternProperty(
        'Search only files whose path matches this glob, for example "*.ts" or "src/**/*.test.js".',
      ),
      ignore_case: { type: 'boolean', description: 'Match without regard to case.' },
    },
    required: ['pattern'],
    additionalProperties: false,
  },
  find: {
    type: 'object',
    properties: {
      pattern: patternProperty(
        'A glob such as "**/*.ts" or "src/*.js"; a pattern without "/" matches file and directory names anywhere, for example "*.md".',
      ),
      path: pathProperty('The directory to search under; the whole workspace when omitted.'),
    },
    required: ['pattern'],
    additionalProperties: false,
  },
};

/** What each file tool does, for the model. */
export const FILE_TOOL_DESCRIPTIONS: Record<keyof typeof FILE_TOOL_PARAMETERS, string> = {
  read_file:
    'Read a text file of the workspace, exactly as it is, or a range of its lines (start_line..end_line, counted from 1). A file above the read ceiling must be read in ranges; binary files cannot be read.',
  write_file:
    'Write a whole file, replacing its content or creating it (and its directories). Prefer edit_file or patch_file for a small change to a large file.',
  edit_file:
    'Replace one exact piece of text in a file: old_string must occur exactly once, and is replaced by new_string. Read the file first and copy old_string exactly.',
  patch_file:
    'Apply a unified diff to one file. All hunks are applied or none; if a hunk does not fit, the error names it and nothing is written.',
  grep: 'Search the text files of the workspace for lines matching a regular expression; prints path:line:text, paths sorted. Skips .git, node_modules and binary files.',
  find: 'List the files and directories whose paths match a glob, sorted; directories end in "/". Skips .git and node_modules unless the pattern names them.',
};
