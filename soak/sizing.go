package main

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/ddbpipe/ddbpipe/shared/archive"
	"github.com/ddbpipe/ddbpipe/shared/archive/archiveddb"
	"github.com/ddbpipe/ddbpipe/shared/ledger"
	"github.com/ddbpipe/ddbpipe/shared/votes"
	"github.com/ddbpipe/ddbpipe/shared/votes/votesddb"
	"github.com/ddbpipe/ddbpipe/shared/votes/votesload"
)

// The votes' load, when -rate does not fix it, is sized from the store's
// ceiling measured before the load: a steady part below it and a few short
// bursts above it, so the soak holds as much on a slow machine as on a
// fast one, and every burst leaves a backlog that must wait in the votes
// queue and drain at the store's rate.
const (
	// DefaultSteadyShare is the steady rate against the ceiling. The
	// ceiling is the store's alone, measured with the whole machine; in the
	// soak the same cores also run five functions, their stream readers,
	// the document clients, the faults and the restarts, and the bursts
	// leave backlogs that the steady part must leave room to drain.
	DefaultSteadyShare = 0.06
	// DefaultBurstShare is a burst's rate against the ceiling: above it,
	// whatever the store serves by then.
	DefaultBurstShare = 1.5
	DefaultBursts     = 4
	DefaultBurstFor   = 2 * time.Second
	// ceilingWarmUp and ceilingFor are the probe's first load (it warms
	// DynamoDB Local's JVM; its figure is not kept) and the measured one.
	ceilingWarmUp = 2 * time.Second
	ceilingFor    = 4 * time.Second
)

// sizing is the votes' load of one soak.
type sizing struct {
	// Ceiling is the puts a second a plain loader got from the store
	// before the load, Writers at once (0: -rate fixed the load).
	Ceiling float64
	Writers int
	// Steady and Burst are the producers' votes a second, between bursts
	// and during one.
	Steady, Burst float64
}

// size measures the store's ceiling unless -rate fixed the load, and sets
// the rates from it.
func (s *soak) size(ctx context.Context) error {
	c := s.cfg
	if c.VotesPerSecond > 0 {
		s.sizing = sizing{Steady: float64(c.VotesPerSecond)}
		return nil
	}
	writers, err := counterWriters(s)
	if err != nil {
		return err
	}
	ceiling, err := s.measureCeiling(ctx, writers)
	if err != nil {
		return err
	}
	s.sizing = sizing{Ceiling: ceiling, Writers: writers, Steady: max(1, c.SteadyShare*ceiling), Burst: c.BurstShare * ceiling}
	s.progress("the store's ceiling: %.0f puts/s (%d writers); votes: %.0f/s steady (%.2f ×), %d bursts of %.0f/s for %s (%.2f ×)",
		ceiling, writers, s.sizing.Steady, c.SteadyShare, c.Bursts, s.sizing.Burst, c.BurstFor, c.BurstShare)
	return nil
}

// counterWriters is as many puts as the counter has in flight at most: its
// invocations (the SQS event's maximum concurrency) × its puts each.
func counterWriters(s *soak) (int, error) {
	fns, err := s.env.Stack.Functions()
	if err != nil {
		return 0, err
	}
	for _, f := range fns {
		if f.LogicalID != "CounterFunction" {
			continue
		}
		for _, ev := range f.Events {
			scaling, _ := ev.Properties["ScalingConfig"].(map[string]any)
			if n, err := strconv.Atoi(fmt.Sprint(scaling["MaximumConcurrency"])); ev.Type == "SQS" && err == nil && n > 0 {
				return n * votes.DefaultParallel, nil
			}
		}
	}
	return 0, fmt.Errorf("soak: the template's CounterFunction has no SQS event with a maximum concurrency")
}

// measureCeiling puts the counter's own ledger items, with its condition,
// into a scratch table of the ledger's shape (its stream on, no function
// reading it) for ceilingFor after a warm-up, and deletes the table. The
// table is named outside the rotator's pattern, so no run sees it.
func (s *soak) measureCeiling(ctx context.Context, writers int) (float64, error) {
	prefix := s.env.Vars["LEDGER_TABLE_PREFIX"] + "-ceiling"
	now := s.clock.Now
	table := ledger.TableName(prefix, ledger.MonthOf(now()))
	db := s.env.Clients.DynamoDB
	in := archiveddb.CreateInput(archive.Spec{Name: table})
	in.DeletionProtectionEnabled = aws.Bool(false)
	if _, err := db.CreateTable(ctx, in); err != nil {
		return 0, fmt.Errorf("soak: ceiling table: %w", err)
	}
	defer func() {
		if _, err := db.DeleteTable(context.WithoutCancel(ctx), &dynamodb.DeleteTableInput{TableName: aws.String(table)}); err != nil {
			s.progress("WARNING: the ceiling's table %s was not deleted: %v", table, err)
		}
	}()
	if err := dynamodb.NewTableExistsWaiter(db).Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)}, time.Minute); err != nil {
		return 0, fmt.Errorf("soak: ceiling table: %w", err)
	}
	l := &votesload.Ceiling{Store: votesddb.New(db, s.env.Vars["COUNTERS_TABLE_NAME"], prefix), PollID: "soak-ceiling",
		Options: polls["soak-spread"], Writers: writers, Now: now}
	if _, err := l.Run(ctx, ceilingWarmUp); err != nil {
		return 0, err
	}
	return l.Run(ctx, ceilingFor)
}

// votesDue is the votes the producers owe from d0 to d1 into the load:
// Steady a second, and Burst a second over the part of [d0, d1) that
// falls in a burst. A producer late by more than a burst's length still
// sends that burst's votes, at once.
func (s *soak) votesDue(d0, d1 time.Duration) float64 {
	due := s.sizing.Steady * (d1 - d0).Seconds()
	for k := range s.burstStarts() {
		from, to := max(d0, s.burstStart(k)), min(d1, s.burstStart(k)+s.cfg.BurstFor)
		if to > from {
			due += (s.sizing.Burst - s.sizing.Steady) * (to - from).Seconds()
		}
	}
	return due
}

// burstStarts is how many bursts the load has.
func (s *soak) burstStarts() int {
	if s.sizing.Ceiling == 0 || s.cfg.Bursts <= 0 {
		return 0 // a fixed -rate: no bursts
	}
	return s.cfg.Bursts
}

// burstStart is when burst k (0, 1, ...) begins, into the load.
func (s *soak) burstStart(k int) time.Duration {
	return time.Duration(k+1) * (s.cfg.Duration / time.Duration(s.cfg.Bursts+1))
}
