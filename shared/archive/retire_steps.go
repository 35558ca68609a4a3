package archive

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// ensure: the stream has a consumer; a provisioned table is lowered.
func (rt *retirement) ensure(ctx context.Context) (string, error) {
	t, cold := rt.t, rt.pol.ColdCapacity
	var notes []string
	if t.StreamARN != "" && t.StreamEnabled {
		created, err := rt.r.Subscriptions.Ensure(ctx, t.StreamARN)
		if err != nil {
			return "", err
		}
		if created {
			notes = append(notes, "subscribed the stream's readers")
		}
	}
	if c := t.Capacity; c != nil && (c.Read > cold.Read || c.Write > cold.Write) {
		if err := rt.r.Tables.SetCapacity(ctx, t.Name, cold); err != nil {
			return "", err
		}
		notes = append(notes, fmt.Sprintf("capacity lowered to %d/%d", cold.Read, cold.Write))
	}
	if len(notes) == 0 {
		return "nothing to change", nil
	}
	return strings.Join(notes, "; "), nil
}

// drain: stream off, then wait until the archive (and the counters, when
// Counted is set) hold the last record of every shard. A drain that runs
// out of DrainWait stops the retirement, NotDrained: the next run tries
// again.
func (rt *retirement) drain(ctx context.Context) (string, error) {
	t := rt.t
	off := "stream off: already; "
	switch {
	case t.StreamARN == "":
		off = "no stream; "
	case t.StreamEnabled:
		if err := rt.r.Tables.DisableStream(ctx, t.Name); err != nil {
			return "", err
		}
		off = "stream off; "
	}
	detail, err := rt.drained(ctx)
	if detail != "" {
		detail = off + detail
	}
	return detail, err
}

// drained waits until the archive and the counters hold the last record of
// every shard, or DrainWait passes (stop NotDrained).
func (rt *retirement) drained(ctx context.Context) (string, error) {
	t := rt.t
	// Bounded by the pauses taken and by the elapsed time, whichever is
	// further along: a stalled archive never holds the run past DrainWait.
	start, waited := time.Now(), time.Duration(0)
	pause := rt.pol.DrainPoll
	for checks := 1; ; checks++ {
		var err error
		if rt.contents, err = rt.r.Archive.Read(ctx, rt.p); err != nil {
			return "", err
		}
		c := rt.contents
		if m := c.Manifest; m != nil && m.Verification != nil && !t.StreamEnabled {
			// An earlier run drained the stream (off since), verified and
			// compacted the month: the compaction replayed away the
			// sequence numbers of superseded records, which the check
			// below would wait for until the stream trims them.
			rt.ret.ArchiveRows = c.Rows
			return fmt.Sprintf("drained by the run of %s (stream off since; %d files, %d rows)", m.CreatedAt.Format(time.RFC3339), len(c.Files), c.Rows), nil
		}
		unarchived, uncounted, err := rt.pending(ctx)
		if err != nil {
			return "", err
		}
		if unarchived+uncounted == 0 {
			rt.ret.ArchiveRows = c.Rows
			return fmt.Sprintf("archive and counters hold the last record of every shard (%d files, %d rows; %d checks)", len(c.Files), c.Rows, checks), nil
		}
		if max(waited, time.Since(start))+pause > rt.pol.DrainWait {
			rt.stop = NotDrained
			return fmt.Sprintf("%d stream records not archived and %d not counted after %s (oldest %.0fs old); retried next run",
				unarchived, uncounted, rt.pol.DrainWait, rt.ret.LagSeconds), nil
		}
		if err := rt.r.sleep(ctx, pause); err != nil {
			return "", err
		}
		waited += pause
		pause = min(2*pause, 30*time.Second)
	}
}

// pending counts the stream's records the archive (as last read) and the
// counters have not caught up with, and sets the lag of the oldest.
func (rt *retirement) pending(ctx context.Context) (unarchived, uncounted int, err error) {
	var pending []StreamRecord
	if rt.t.StreamARN != "" {
		recs, err := rt.r.Streams.Records(ctx, rt.t.StreamARN)
		if err != nil && !errors.Is(err, ErrNotFound) {
			return 0, 0, err
		}
		pending = Unarchived(recs, rt.contents)
		unarchived = len(pending)
		if rt.r.Counted != nil {
			counting, err := rt.r.Counted.Uncounted(ctx, rt.t.Name, recs)
			if err != nil {
				return 0, 0, err
			}
			uncounted = len(counting)
			pending = append(pending, counting...)
		}
	}
	rt.ret.LagSeconds = Lag(pending, rt.now())
	return unarchived, uncounted, nil
}

// verify: the archive against a parallel Scan of the table.
func (rt *retirement) verify(ctx context.Context) (string, error) {
	start := time.Now()
	scan, err := rt.r.Tables.Scan(ctx, rt.t.Name, false)
	if err != nil {
		return "", err
	}
	rt.ret.ScanTook = scan.Took
	rt.report = Verify(rt.contents.State, scan.State)
	rt.ret.VerifyTook = time.Since(start)
	rt.ret.Verification = &rt.report
	rt.verification = Verification{At: rt.now(), TableItems: rt.report.TableItems, ArchivedItems: rt.report.ArchivedItems, OK: rt.report.OK()}
	return rt.report.String(), nil
}

// counters: the month's votes the tally counted against its verified
// items. A difference does not hold the retirement up (the archive is
// complete, and the counters can be put right from it): it alarms.
func (rt *retirement) counters(ctx context.Context) (string, error) {
	n, err := rt.r.Counted.Tallied(ctx, rt.t.Name)
	if err != nil {
		return "", err
	}
	rt.ret.Counters = &CountersCheck{Tallied: n, Items: int64(rt.report.TableItems)}
	return rt.ret.Counters.String(), nil // a difference: ReportRotation logs the alarm and its metric
}

// snapshot: the table's items, as rows that supersede the stream's. Only
// the difference: the items the archive misses or holds with another
// image, and REMOVEs of those the table lost (the same rows as a
// backfill's, with a snapshot's sequence, which supersedes every stream
// record: the stream is off).
func (rt *retirement) snapshot(ctx context.Context) (string, error) {
	full, err := rt.r.Tables.Scan(ctx, rt.t.Name, true)
	if err != nil {
		return "", err
	}
	// A snapshot of the same instant (a run again with the same clock)
	// would be overwritten: then write the whole table, which needs no
	// earlier file.
	at := rt.now()
	key, base := SnapshotKey(rt.p, at), rt.contents.State
	for _, f := range rt.contents.Files {
		if f.Key == key {
			base = State{}
		}
	}
	rows, err := SnapshotRows(rt.p, full, base, at)
	if err != nil {
		return "", err
	}
	rt.ret.Snapshot = CountBackfill(rows, rt.contents.State)
	if len(rows) == 0 {
		return "the table now matches the archive: nothing to write", nil
	}
	f, err := rt.r.Archive.Write(ctx, key, rows)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("wrote %s to %s", rt.ret.Snapshot, f.Key), nil
}

// reverify: the archive, with the snapshot, against the table again. The
// retirement alarms whatever it finds; when the archive is complete now,
// it is compacted, but the table is kept this run: a later run that
// verifies it without a snapshot retires it.
func (rt *retirement) reverify(ctx context.Context) (string, error) {
	c, err := rt.r.Archive.Read(ctx, rt.p)
	if err != nil {
		return "", err
	}
	s, err := rt.r.Tables.Scan(ctx, rt.t.Name, false)
	if err != nil {
		return "", err
	}
	again := Verify(c.State, s.State)
	rt.ret.Reverification = &again
	first := rt.report
	rt.alarm = func() {
		rt.r.log().Error("rotation alarm: the archive did not match the table; snapshot export written; table kept",
			"table", rt.t.Name, "first", first.String(), "snapshot", rt.ret.Snapshot.String(), "afterSnapshot", again.String(),
			"missing", len(first.Missing), "extra", len(first.Extra), "different", len(first.Different))
	}
	rt.stop = Alarm
	if again.OK() {
		rt.stop = "" // compacted first; the compaction stops the walk
		rt.verification = Verification{At: rt.now(), TableItems: again.TableItems, ArchivedItems: again.ArchivedItems, OK: true, Snapshot: true}
	}
	return again.String(), nil
}

// compact: the month's small files merged, and the manifest written with
// the verification. After a snapshot, the walk stops here, Alarm.
func (rt *retirement) compact(ctx context.Context) (string, error) {
	c, err := rt.r.Archive.Compact(ctx, rt.p, rt.pol.Compaction, rt.t.Name, rt.verification)
	if err != nil {
		return "", err
	}
	rt.ret.Compaction = &c
	if rt.verification.Snapshot {
		rt.stop = Alarm
	}
	return fmt.Sprintf("%d files → %d (%d merged); manifest of %d rows", c.FilesBefore, c.FilesAfter, c.Merged, c.Manifest.Rows), nil
}

// unsubscribe: the stream's readers go.
func (rt *retirement) unsubscribe(ctx context.Context) (string, error) {
	if rt.t.StreamARN == "" {
		return "no stream", nil
	}
	n, err := rt.r.Subscriptions.Remove(ctx, rt.t.StreamARN)
	if err == nil && n == 0 {
		return "no mappings: removed already", nil
	}
	return fmt.Sprintf("%d mappings removed", n), err
}

// unprotect: deletion protection goes, only from a month verified
// archived (without a snapshot this run) and compacted. The walk gets
// here only this way; said again where it matters.
func (rt *retirement) unprotect(ctx context.Context) (string, error) {
	if v := rt.verification; !v.OK || v.Snapshot || rt.ret.Compaction == nil {
		return "", errors.New("refused: the month is not verified archived and compacted")
	}
	if !rt.t.DeletionProtection {
		return "deletion protection off: already", nil
	}
	return "deletion protection off", rt.r.Tables.Protect(ctx, rt.t.Name, false)
}

// delete: the table goes (gone already is done).
func (rt *retirement) delete(ctx context.Context) (string, error) {
	err := rt.r.Tables.Delete(ctx, rt.t.Name)
	if errors.Is(err, ErrNotFound) {
		return "gone already", nil
	}
	return "deleted", err
}
