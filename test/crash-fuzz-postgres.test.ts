/**
 * The crash fuzz on PostgreSQL: the same tree, the same seeded points and the same
 * invariants as on SQLite (test/crash-fuzz.test.ts, test/support/crash-fuzz.ts), each
 * attempt on a database of its own on the tests' server, its rows read back with plain
 * SQL. An admission there is a claim from the rows, so a seeded point in the queue names
 * that operation. Minutes of work: it says how far it is every ten kills.
 */
import { POSTGRES } from './support/backends.js';
import { crashFuzz } from './support/crash-fuzz.js';

crashFuzz(POSTGRES);
