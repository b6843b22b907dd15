/**
 * Crash fuzz on SQLite (crash-fuzz-postgres.test.ts runs the same on PostgreSQL; the
 * body is test/support/crash-fuzz.ts): a child process drives a tree of 56 agents, each
 * calling a seeded scripted model over HTTP (the OpenAI wire, a server in the same
 * process), and is SIGKILLed (a real kill -9, by the store actor's test hook) at seeded
 * points before, inside and after a commit, mid-spawn, mid-message and mid-queue. A fresh
 * process resumes it, sometimes is killed again, and a last one finishes it. Every
 * durability invariant is checked against the file's own rows, and the outcome and ledger
 * must equal those of an uncrashed run on the same model. Minutes of work: it says how
 * far it is every ten kills.
 */
import { SQLITE } from './support/backends.js';
import { crashFuzz } from './support/crash-fuzz.js';

crashFuzz(SQLITE);
