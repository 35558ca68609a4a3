// Package archiveddb is the archive's adapter to DynamoDB and DynamoDB
// Streams: it creates and updates the monthly ledger tables (the vote
// ledger's key schema, a NEW_AND_OLD_IMAGES stream, PITR, deletion
// protection, tags), reads them with a parallel Scan into the archive's
// verification state, lists what their streams still hold, and deletes
// them (it implements archive.Tables and archive.Streams); Plain turns
// DynamoDB attribute values into the archive's items.
//
// DynamoDB Local has no point-in-time recovery (Describe/Update
// ContinuousBackups) and no tagging (TagResource): it answers both with
// UnknownOperationException. Nor has it warm throughput: CreateTable takes
// WarmThroughput and ignores it, DescribeTable reports none, and an
// UpdateTable of the warm throughput alone is refused with a
// ValidationException "Nothing to update". Against a local server (Local
// set: the configuration overrides the DynamoDB endpoint, see
// awsenv.Overridden) exactly those answers to exactly those calls are
// skipped with a logged note kept in Notes; every other error, locally as
// against AWS, is returned.
package archiveddb

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/ddbpipe/ddbpipe/shared/archive"
	"github.com/ddbpipe/ddbpipe/shared/ledger"
	"github.com/ddbpipe/ddbpipe/shared/platform/awserr"
	"github.com/ddbpipe/ddbpipe/shared/platform/retry"
)

// API is the part of DynamoDB Tables uses; *dynamodb.Client satisfies it,
// and so does the unit tests' fakeDB, a table's control plane with the
// warm throughput and point-in-time recovery DynamoDB Local lacks. The
// package's other adapters take the client itself.
type API interface {
	CreateTable(ctx context.Context, in *dynamodb.CreateTableInput, opts ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error)
	DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, opts ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
	UpdateTable(ctx context.Context, in *dynamodb.UpdateTableInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateTableOutput, error)
	DeleteTable(ctx context.Context, in *dynamodb.DeleteTableInput, opts ...func(*dynamodb.Options)) (*dynamodb.DeleteTableOutput, error)
	ListTables(ctx context.Context, in *dynamodb.ListTablesInput, opts ...func(*dynamodb.Options)) (*dynamodb.ListTablesOutput, error)
	UpdateContinuousBackups(ctx context.Context, in *dynamodb.UpdateContinuousBackupsInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateContinuousBackupsOutput, error)
	DescribeContinuousBackups(ctx context.Context, in *dynamodb.DescribeContinuousBackupsInput, opts ...func(*dynamodb.Options)) (*dynamodb.DescribeContinuousBackupsOutput, error)
	TagResource(ctx context.Context, in *dynamodb.TagResourceInput, opts ...func(*dynamodb.Options)) (*dynamodb.TagResourceOutput, error)
	Scan(ctx context.Context, in *dynamodb.ScanInput, opts ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error)
	BatchWriteItem(ctx context.Context, in *dynamodb.BatchWriteItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.BatchWriteItemOutput, error)
}

var (
	_ API            = (*dynamodb.Client)(nil)
	_ archive.Tables = (*Tables)(nil)
)

// Tables manages monthly tables.
type Tables struct {
	DB API
	// Local: the endpoint is a local server (DynamoDB Local), which has no
	// PITR, no tagging and no warm throughput; those are skipped with a
	// note (see localLacks). Nothing else is.
	Local bool
	Log   *slog.Logger
	// Segments of the parallel Scan (default 4).
	Segments int
	// Progress, when set, hears after each page of a Scan how many items
	// the Scan has read so far, all segments together (a long Scan's
	// progress line). It is called from the segments' goroutines.
	Progress func(items int64)
	// ActiveWait bounds each wait for a table to become active (default 2 min).
	ActiveWait time.Duration

	mu    sync.Mutex
	notes []string
}

// Notes lists what a local server refused, once each.
func (t *Tables) Notes() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]string(nil), t.notes...)
}

func (t *Tables) log() *slog.Logger {
	if t.Log != nil {
		return t.Log
	}
	return slog.Default()
}

// Features DynamoDB Local does not implement: it answers the operations
// of the first two with UnknownOperationException (see
// TestLocalServerLacksPITRAndTagging) and ignores the third (see
// TestLocalServerIgnoresWarmThroughput).
const (
	featurePITR = "point-in-time recovery (ContinuousBackups)"
	featureTags = "tagging (TagResource)"
	featureWarm = "warm throughput (WarmThroughput)"
)

// localLacks reports whether err is a local server saying it does not
// implement feature: only when Local is set, and only for
// UnknownOperationException — or, for warm throughput, the
// ValidationException "Nothing to update" that answers an UpdateTable of
// the warm throughput alone. It notes the skip, once per feature. Every
// other error — throttling, another validation, a missing table — is not
// a lack and must be returned.
func (t *Tables) localLacks(err error, feature string) bool {
	if err == nil || !t.Local {
		return false
	}
	if feature == featureWarm {
		var ae smithy.APIError
		if !errors.As(err, &ae) || ae.ErrorCode() != "ValidationException" || ae.ErrorMessage() != "Nothing to update" {
			return false
		}
	} else if !awserr.Is(err, "UnknownOperationException") {
		return false
	}
	t.note(feature, "err", err)
	return true
}

// note records, once per feature, that the local server lacks it.
func (t *Tables) note(feature string, attrs ...any) {
	note := "local DynamoDB has no " + feature + "; skipped"
	t.mu.Lock()
	seen := slices.Contains(t.notes, note)
	if !seen {
		t.notes = append(t.notes, note)
	}
	t.mu.Unlock()
	if !seen {
		t.log().Warn(note, attrs...)
	}
}

// IsNotFound reports whether err says the table does not exist.
func IsNotFound(err error) bool {
	var nf *types.ResourceNotFoundException
	return errors.As(err, &nf) || errors.Is(err, archive.ErrNotFound) || awserr.Is(err, "ResourceNotFoundException")
}

// describe returns the table's description, archive.ErrNotFound if absent.
func (t *Tables) describe(ctx context.Context, name string) (*types.TableDescription, error) {
	out, err := t.DB.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)})
	if IsNotFound(err) {
		return nil, fmt.Errorf("archiveddb: %s: %w", name, archive.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("archiveddb: describe %s: %w", name, err)
	}
	return out.Table, nil
}

// Describe describes one table (archive.ErrNotFound when it does not
// exist): its stream, protection and capacity.
func (t *Tables) Describe(ctx context.Context, name string) (archive.Table, error) {
	d, err := t.describe(ctx, name)
	if err != nil {
		return archive.Table{}, err
	}
	return tableOf(d), nil
}

func tableOf(d *types.TableDescription) archive.Table {
	tb := archive.Table{
		Name: aws.ToString(d.TableName), Status: string(d.TableStatus), StreamARN: aws.ToString(d.LatestStreamArn),
		StreamEnabled:      d.StreamSpecification != nil && aws.ToBool(d.StreamSpecification.StreamEnabled),
		DeletionProtection: aws.ToBool(d.DeletionProtectionEnabled),
	}
	if d.CreationDateTime != nil {
		tb.CreatedAt = d.CreationDateTime.UTC()
	}
	provisioned := d.BillingModeSummary == nil || d.BillingModeSummary.BillingMode == types.BillingModeProvisioned
	if pt := d.ProvisionedThroughput; provisioned && pt != nil && aws.ToInt64(pt.ReadCapacityUnits) > 0 {
		tb.Capacity = &archive.Capacity{Read: aws.ToInt64(pt.ReadCapacityUnits), Write: aws.ToInt64(pt.WriteCapacityUnits)}
	}
	if w := d.WarmThroughput; w != nil && (w.ReadUnitsPerSecond != nil || w.WriteUnitsPerSecond != nil) {
		tb.Warm = &archive.Warm{Read: aws.ToInt64(w.ReadUnitsPerSecond), Write: aws.ToInt64(w.WriteUnitsPerSecond)}
		tb.WarmUpdating = w.Status != "" && w.Status != types.TableStatusActive
	}
	return tb
}

// warmInput is the WarmThroughput of a request for w: its non-zero
// fields; nil when it has none.
func warmInput(w *archive.Warm) *types.WarmThroughput {
	if w == nil || *w == (archive.Warm{}) {
		return nil
	}
	in := &types.WarmThroughput{}
	if w.Read > 0 {
		in.ReadUnitsPerSecond = aws.Int64(w.Read)
	}
	if w.Write > 0 {
		in.WriteUnitsPerSecond = aws.Int64(w.Write)
	}
	return in
}

// List describes the monthly tables of base: those named base-YYYY-MM
// (tables being deleted are left out). Another table whose name starts the
// same way (a stack named base-dev has tables base-dev-...) is neither
// described nor returned: the rotator's role may describe only base-????-??.
func (t *Tables) List(ctx context.Context, base string) ([]archive.Table, error) {
	var names []string
	p := dynamodb.NewListTablesPaginator(t.DB, &dynamodb.ListTablesInput{})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("archiveddb: list tables: %w", err)
		}
		for _, n := range page.TableNames {
			if b, _, ok := ledger.SplitTable(n); ok && b == base {
				names = append(names, n)
			}
		}
	}
	sort.Strings(names)
	var out []archive.Table
	for _, n := range names {
		d, err := t.describe(ctx, n)
		if errors.Is(err, archive.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if d.TableStatus == types.TableStatusDeleting {
			continue
		}
		out = append(out, tableOf(d))
	}
	return out, nil
}

func tagList(m map[string]string) []types.Tag {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	tags := make([]types.Tag, 0, len(keys))
	for _, k := range keys {
		tags = append(tags, types.Tag{Key: aws.String(k), Value: aws.String(m[k])})
	}
	return tags
}

// ledgerKeySchema is a ledger table's key: pk (hash) and sk (range), both
// strings (votes.Entry.LedgerKey). The counter creates a month's table on
// first use with its own copy (votesddb.LedgerKeySchema); the rotator keeps
// this one so that neither flow links the other's adapter, and
// tests/rotation_test.go (TestLedgerKeySchemaAgrees) holds the two equal.
func ledgerKeySchema() ([]types.AttributeDefinition, []types.KeySchemaElement) {
	return []types.AttributeDefinition{
			{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String("sk"), AttributeType: types.ScalarAttributeTypeS},
		}, []types.KeySchemaElement{
			{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String("sk"), KeyType: types.KeyTypeRange},
		}
}

// CreateInput is the CreateTable request for a spec.
func CreateInput(s archive.Spec) *dynamodb.CreateTableInput {
	defs, keys := ledgerKeySchema()
	in := &dynamodb.CreateTableInput{
		TableName: aws.String(s.Name), AttributeDefinitions: defs, KeySchema: keys,
		BillingMode:               types.BillingModePayPerRequest,
		StreamSpecification:       &types.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: types.StreamViewTypeNewAndOldImages},
		DeletionProtectionEnabled: aws.Bool(true),
		Tags:                      tagList(s.Tags),
		WarmThroughput:            warmInput(s.Warm),
	}
	if c := s.Capacity; c != nil {
		in.BillingMode = types.BillingModeProvisioned
		in.ProvisionedThroughput = &types.ProvisionedThroughput{ReadCapacityUnits: aws.Int64(c.Read), WriteCapacityUnits: aws.Int64(c.Write)}
	}
	return in
}

// Ensure creates the table unless it exists, waits until it is active, and
// turns on PITR, deletion protection and the tags (an existing table the
// counter created has none of them).
func (t *Tables) Ensure(ctx context.Context, s archive.Spec) (archive.Table, bool, error) {
	d, err := t.describe(ctx, s.Name)
	created := false
	if errors.Is(err, archive.ErrNotFound) {
		_, err = t.DB.CreateTable(ctx, CreateInput(s))
		switch {
		case awserr.Is(err, "ResourceInUseException"): // created meanwhile (the counter)
		case err != nil:
			return archive.Table{}, false, fmt.Errorf("archiveddb: create %s: %w", s.Name, err)
		default:
			created = true
		}
	} else if err != nil {
		return archive.Table{}, false, err
	}
	if d, err = t.waitActive(ctx, s.Name); err != nil {
		return archive.Table{}, created, err
	}
	if !aws.ToBool(d.DeletionProtectionEnabled) {
		if err := t.update(ctx, &dynamodb.UpdateTableInput{TableName: aws.String(s.Name), DeletionProtectionEnabled: aws.Bool(true)}, "deletion protection"); err != nil {
			return archive.Table{}, created, err
		}
	}
	if err := t.pitr(ctx, s.Name); err != nil {
		return archive.Table{}, created, err
	}
	if len(s.Tags) > 0 {
		_, err := t.DB.TagResource(ctx, &dynamodb.TagResourceInput{ResourceArn: d.TableArn, Tags: tagList(s.Tags)})
		if err != nil && !t.localLacks(err, featureTags) {
			return archive.Table{}, created, fmt.Errorf("archiveddb: tag %s: %w", s.Name, err)
		}
	}
	if d, err = t.describe(ctx, s.Name); err != nil {
		return archive.Table{}, created, err
	}
	if created && t.Local && warmInput(s.Warm) != nil && d.WarmThroughput == nil {
		// DynamoDB Local took the table's warm throughput and ignored it.
		t.note(featureWarm, "table", s.Name, "asked", s.Warm.String())
	}
	return tableOf(d), created, nil
}

// pitr turns point-in-time recovery on unless it is on.
func (t *Tables) pitr(ctx context.Context, name string) error {
	out, err := t.DB.DescribeContinuousBackups(ctx, &dynamodb.DescribeContinuousBackupsInput{TableName: aws.String(name)})
	if t.localLacks(err, featurePITR) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("archiveddb: describe PITR of %s: %w", name, err)
	}
	if d := out.ContinuousBackupsDescription; d != nil && d.PointInTimeRecoveryDescription != nil &&
		d.PointInTimeRecoveryDescription.PointInTimeRecoveryStatus == types.PointInTimeRecoveryStatusEnabled {
		return nil
	}
	_, err = t.DB.UpdateContinuousBackups(ctx, &dynamodb.UpdateContinuousBackupsInput{
		TableName:                        aws.String(name),
		PointInTimeRecoverySpecification: &types.PointInTimeRecoverySpecification{PointInTimeRecoveryEnabled: aws.Bool(true)},
	})
	if err != nil && !t.localLacks(err, featurePITR) {
		return fmt.Errorf("archiveddb: PITR on %s: %w", name, err)
	}
	return nil
}

// update applies an UpdateTable and waits until the table is active again.
func (t *Tables) update(ctx context.Context, in *dynamodb.UpdateTableInput, what string) error {
	name := aws.ToString(in.TableName)
	if _, err := t.waitActive(ctx, name); err != nil {
		return err
	}
	_, err := t.DB.UpdateTable(ctx, in)
	if IsNotFound(err) {
		return fmt.Errorf("archiveddb: %s: %w", name, archive.ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("archiveddb: %s on %s: %w", what, name, err)
	}
	_, err = t.waitActive(ctx, name)
	return err
}

// waitActive polls until the table is ACTIVE, within ActiveWait, with
// activePoll's pauses between the polls.
func (t *Tables) waitActive(ctx context.Context, name string) (*types.TableDescription, error) {
	limit := t.ActiveWait
	if limit <= 0 {
		limit = 2 * time.Minute
	}
	deadline := time.Now().Add(limit)
	for n := 1; ; n++ {
		d, err := t.describe(ctx, name)
		if err != nil {
			return nil, err
		}
		if d.TableStatus == types.TableStatusActive {
			return d, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("archiveddb: %s still %s after %s", name, d.TableStatus, limit)
		}
		if err := activePoll.Wait(ctx, n); err != nil {
			return nil, err
		}
	}
}

// activePoll spaces the polls of a table's status: 100 ms doubling to 2 s.
var activePoll = retry.Backoff{Base: 100 * time.Millisecond, Max: 2 * time.Second}

// SetCapacity changes a provisioned table's throughput.
func (t *Tables) SetCapacity(ctx context.Context, name string, c archive.Capacity) error {
	return t.update(ctx, &dynamodb.UpdateTableInput{TableName: aws.String(name),
		ProvisionedThroughput: &types.ProvisionedThroughput{ReadCapacityUnits: aws.Int64(c.Read), WriteCapacityUnits: aws.Int64(c.Write)}}, "capacity")
}

// RaiseWarm raises the table's warm throughput to w's non-zero fields. It
// does not wait for the raise: DynamoDB applies it in the background (the
// table's warm throughput is UPDATING meanwhile) and the table stays
// usable. raised is false when the local server has no warm throughput
// (noted; see localLacks).
func (t *Tables) RaiseWarm(ctx context.Context, name string, w archive.Warm) (bool, error) {
	in := warmInput(&w)
	if in == nil {
		return false, fmt.Errorf("archiveddb: warm throughput of %s: nothing to raise", name)
	}
	if _, err := t.waitActive(ctx, name); err != nil {
		return false, err
	}
	_, err := t.DB.UpdateTable(ctx, &dynamodb.UpdateTableInput{TableName: aws.String(name), WarmThroughput: in})
	switch {
	case t.localLacks(err, featureWarm):
		return false, nil
	case IsNotFound(err):
		return false, fmt.Errorf("archiveddb: %s: %w", name, archive.ErrNotFound)
	case err != nil:
		return false, fmt.Errorf("archiveddb: raise the warm throughput of %s: %w", name, err)
	}
	return true, nil
}

// DisableStream turns the table's stream off. A stream off already is
// left so: DynamoDB refuses to turn it off twice (ValidationException
// "Table has no stream to disable" locally).
func (t *Tables) DisableStream(ctx context.Context, name string) error {
	d, err := t.waitActive(ctx, name)
	if err != nil {
		return err
	}
	if d.StreamSpecification == nil || !aws.ToBool(d.StreamSpecification.StreamEnabled) {
		return nil
	}
	return t.update(ctx, &dynamodb.UpdateTableInput{TableName: aws.String(name),
		StreamSpecification: &types.StreamSpecification{StreamEnabled: aws.Bool(false)}}, "stream off")
}

// Protect turns deletion protection on or off.
func (t *Tables) Protect(ctx context.Context, name string, on bool) error {
	d, err := t.describe(ctx, name)
	if err != nil {
		return err
	}
	if aws.ToBool(d.DeletionProtectionEnabled) == on {
		return nil
	}
	return t.update(ctx, &dynamodb.UpdateTableInput{TableName: aws.String(name), DeletionProtectionEnabled: aws.Bool(on)}, "deletion protection")
}

// Delete deletes the table; archive.ErrNotFound if it is gone.
func (t *Tables) Delete(ctx context.Context, name string) error {
	_, err := t.DB.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(name)})
	if IsNotFound(err) {
		return fmt.Errorf("archiveddb: %s: %w", name, archive.ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("archiveddb: delete %s: %w", name, err)
	}
	return nil
}

// Scan reads the table with a parallel Scan of Segments segments
// (consistent reads), into the verification state: key JSON → checksum of
// the item, computed with Plain and archive.KeyJSON /
// archive.Checksum exactly as the archive side computes them from stream
// images. With keepImages, Images holds each item's image JSON too.
func (t *Tables) Scan(ctx context.Context, name string, keepImages bool) (archive.Scan, error) {
	start := time.Now()
	d, err := t.describe(ctx, name)
	if err != nil {
		return archive.Scan{}, err
	}
	var keyNames []string
	for _, k := range d.KeySchema {
		keyNames = append(keyNames, aws.ToString(k.AttributeName))
	}
	segs := t.Segments
	if segs <= 0 {
		segs = 4
	}
	parts := make([]archive.Scan, segs)
	errs := make([]error, segs)
	var wg sync.WaitGroup
	var read atomic.Int64
	for i := range segs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			parts[i], errs[i] = t.scanSegment(ctx, name, keyNames, i, segs, keepImages, &read)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return archive.Scan{}, err
	}
	out := archive.Scan{State: archive.State{}, Segments: segs}
	if keepImages {
		out.Images = map[string]string{}
	}
	for _, p := range parts {
		for k, v := range p.State {
			out.State[k] = v
		}
		for k, v := range p.Images {
			out.Images[k] = v
		}
	}
	out.Took = time.Since(start)
	return out, nil
}

func (t *Tables) scanSegment(ctx context.Context, name string, keyNames []string, seg, total int, keepImages bool, read *atomic.Int64) (archive.Scan, error) {
	s := archive.Scan{State: archive.State{}}
	if keepImages {
		s.Images = map[string]string{}
	}
	p := dynamodb.NewScanPaginator(t.DB, &dynamodb.ScanInput{
		TableName: aws.String(name), ConsistentRead: aws.Bool(true),
		Segment: aws.Int32(int32(seg)), TotalSegments: aws.Int32(int32(total)),
	})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return s, fmt.Errorf("archiveddb: scan %s segment %d/%d: %w", name, seg, total, err)
		}
		for _, av := range page.Items {
			item, err := Plain(av)
			if err != nil {
				return s, fmt.Errorf("archiveddb: scan %s: %w", name, err)
			}
			key, err := archive.KeyJSON(item, keyNames...)
			if err != nil {
				return s, fmt.Errorf("archiveddb: scan %s: %w", name, err)
			}
			img, err := archive.ImageJSON(item)
			if err != nil {
				return s, fmt.Errorf("archiveddb: scan %s: %w", name, err)
			}
			s.State[key] = archive.ChecksumJSON(img)
			if keepImages {
				s.Images[key] = img
			}
		}
		if n := read.Add(int64(len(page.Items))); t.Progress != nil {
			t.Progress(n)
		}
	}
	return s, nil
}
