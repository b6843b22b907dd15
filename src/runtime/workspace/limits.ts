/**
 * The ceilings of the file tools: how much one read returns, how large a write may leave a
 * file, how long a path or a pattern may be, and how many lines a search prints. The
 * reading, the changes, the searches and the argument schemas all hold to the same ones.
 */

/** The default ceiling on one read, in bytes. */
export const DEFAULT_MAX_READ_BYTES = 262144;
/**
 * The largest file a write may leave, in bytes (write_file, edit_file, patch_file), and
 * the most characters a content, old_string, new_string or patch argument may have.
 * Far above any source file; a write above it is refused before anything reaches the
 * store (the step's restore point and diff would otherwise hold it).
 */
export const MAX_WRITE_BYTES = 8 * 1024 * 1024;

/** The largest file read_file reads in parts (start_line, end_line): it is read whole to find the lines. */
export const MAX_RANGED_READ_BYTES = 64 * 1024 * 1024;
/** The most characters a path argument may have (Linux's PATH_MAX). */
export const MAX_PATH_CHARS = 4096;
/** The most characters a grep pattern, a grep glob or a find pattern may have. */
export const MAX_PATTERN_CHARS = 4096;
/** The default number of lines grep and find print. */
export const DEFAULT_MAX_RESULTS = 200;
