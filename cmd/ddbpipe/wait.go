package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/ddbpipe/ddbpipe/shared/archive"
	"github.com/ddbpipe/ddbpipe/shared/platform/retry"
	"github.com/ddbpipe/ddbpipe/shared/votes/votessqs"
)

// catchUp says what -wait waits for: the votes queue to be empty, and the
// archiver or the tally to hold the last record of every shard of the open
// months' ledger streams (the rotator's drain check, on the live months)
// and, for the archiver, of the objects table's stream.
type catchUp struct {
	queue    bool // the votes queue holds no message, visible or not
	archived bool // the archive holds each stream shard's last record
	counted  bool // the tally's checkpoints do
}

// settle is how long -wait's checks must find nothing behind before it
// returns. A stream record is readable a moment after its write (locally,
// the stream-shard emulation reads DynamoDB Local every 100 ms), so a check
// that finds the queue empty can still miss the record of a vote the
// counter wrote just before: a second check a settle later sees it.
const settle = time.Second

// waitCaughtUp checks until the pipeline caught up as c says, or limit
// passes (an error saying what is still behind). A limit of 0 checks
// nothing. It reads the open months' streams and archive partitions on
// each check, which suits a local stack or a month of modest size.
func waitCaughtUp(ctx context.Context, root, state string, c catchUp, limit time.Duration, stderr io.Writer) error {
	if limit <= 0 {
		return nil
	}
	r, _, err := stackRotation(ctx, root, state, 0, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		return err
	}
	// The pipeline's state (streams, checkpoints, the votes queue) is the
	// operator's to read (OperatorPolicy), whichever command waits.
	getenv, err := stackEnv(root, state, asOperator)
	if err != nil {
		return err
	}
	cfg, err := cliAWS(ctx, getenv)
	if err != nil {
		return err
	}
	queueURL := getenv("VOTES_QUEUE_URL")
	if c.queue && queueURL == "" {
		return errors.New("-wait: no votes queue: export VOTES_QUEUE_URL, or run `ddbpipe local up`")
	}
	q := sqs.NewFromConfig(cfg)
	objectsTable, objectsStream := getenv("OBJECTS_TABLE_NAME"), getenv("OBJECTS_TABLE_STREAM_ARN")
	return waitSettled(ctx, func() (string, error) {
		behind, err := pipelineBehind(ctx, r, q, queueURL, objectsTable, objectsStream, c)
		if err != nil {
			return "", fmt.Errorf("-wait: %w", err)
		}
		return behind, nil
	}, limit, settle, stderr)
}

// waitBackoff spaces -wait's checks while something is behind: 250 ms
// doubling to 1 s, without jitter (one CLI has nobody to spread from).
var waitBackoff = retry.Backoff{Base: 250 * time.Millisecond, Max: time.Second, Jitter: retry.NoJitter}

// waitSettled calls behind until it has said nothing is behind ("") on
// checks at least settle apart with no other answer between them. It gives
// up when limit passes while something is behind, saying what. The
// confirming check runs even past the limit: what it guards against is a
// record not readable yet, not a slow pipeline.
func waitSettled(ctx context.Context, behind func() (string, error), limit, settle time.Duration, stderr io.Writer) error {
	start := time.Now()
	said := false
	behindChecks := 0
	var clearAt time.Time // when the checks last began to find nothing behind
	for {
		checked := time.Now()
		what, err := behind()
		if err != nil {
			return err
		}
		var pause time.Duration
		if what == "" {
			if !clearAt.IsZero() && checked.Sub(clearAt) >= settle {
				return nil
			}
			if clearAt.IsZero() {
				clearAt = checked
			}
			pause = settle - checked.Sub(clearAt)
		} else {
			clearAt = time.Time{}
			behindChecks++
			pause = waitBackoff.Delay(behindChecks)
			if time.Since(start)+pause > limit {
				return fmt.Errorf("waited %s: %s", limit, what)
			}
			if !said && time.Since(start) > 2*time.Second {
				fmt.Fprintf(stderr, "waiting (up to %s): %s\n", limit, what)
				said = true
			}
		}
		if err := retry.Sleep(ctx, pause); err != nil {
			return err
		}
	}
}

// pipelineBehind says what has not caught up yet ("" when all has).
func pipelineBehind(ctx context.Context, r *archive.Rotator, q *sqs.Client, queueURL, objectsTable, objectsStream string, c catchUp) (string, error) {
	if c.queue {
		visible, inFlight, err := votessqs.Depth(ctx, q, queueURL)
		if err != nil {
			return "", fmt.Errorf("the votes queue: %w", err)
		}
		n := visible + inFlight
		if n > 0 {
			return fmt.Sprintf("%d votes still in the votes queue", n), nil
		}
	}
	if !c.archived && !c.counted {
		return "", nil
	}
	lags, err := r.StreamLags(ctx, c.archived, c.counted)
	if err != nil {
		return "", err
	}
	var behind []string
	for _, l := range lags {
		if l.Unarchived > 0 {
			behind = append(behind, fmt.Sprintf("%d stream records of %s not archived yet", l.Unarchived, l.Table))
		}
		if l.Uncounted > 0 {
			behind = append(behind, fmt.Sprintf("%d stream records of %s not counted yet", l.Uncounted, l.Table))
		}
	}
	if c.archived && objectsTable != "" && objectsStream != "" {
		n, err := unarchived(ctx, r, objectsTable, objectsStream)
		if err != nil {
			return "", err
		}
		if n > 0 {
			behind = append(behind, fmt.Sprintf("%d stream records of %s not archived yet", n, objectsTable))
		}
	}
	return strings.Join(behind, "; "), nil
}

// unarchived counts the records of a table's stream that the archive lacks,
// for a table whose records are partitioned by the month they were written
// in (archive.PartitionOf): the objects table.
func unarchived(ctx context.Context, r *archive.Rotator, table, streamARN string) (int, error) {
	recs, err := r.Streams.Records(ctx, streamARN)
	if err != nil && !errors.Is(err, archive.ErrNotFound) {
		return 0, err
	}
	byMonth := map[archive.Partition][]archive.StreamRecord{}
	for _, rec := range recs {
		p := archive.PartitionOf(table, rec.CreatedAt)
		byMonth[p] = append(byMonth[p], rec)
	}
	n := 0
	for p, recs := range byMonth {
		contents, err := r.Archive.Read(ctx, p)
		if err != nil {
			return 0, err
		}
		n += len(archive.Unarchived(recs, contents))
	}
	return n, nil
}
