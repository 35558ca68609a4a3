// Package archivelambda is the cold-month flow in Lambda: the archiver,
// which writes DynamoDB stream records as Parquet to the archive bucket, and
// the rotator, which keeps the monthly ledger tables and retires cold ones.
// Each function's Setup reads its configuration, builds its clients once and
// returns its handler; functions/archiver and functions/rotator start them.
package archivelambda
