// Package archivelambda is the cold-month flow in Lambda: the archiver's
// stream handler (Archiver: stream records in, archive objects written
// through an archive.ObjectWriter, batch failures out) and the conversion
// of Lambda's stream records into the archive's Records; the rotator's
// scheduled handler, which keeps the monthly ledger tables and retires
// cold ones; and each function's Setup, which reads its configuration,
// builds its clients once and returns its handler (functions/archiver and
// functions/rotator start them).
package archivelambda
