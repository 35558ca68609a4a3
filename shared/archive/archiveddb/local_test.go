package archiveddb

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/ddbpipe/ddbpipe/shared/archive"
)

// fakeDB is one table's control plane in memory; errs fails an operation
// by name.
type fakeDB struct {
	API        // nil: an operation the fake does not implement panics
	errs       map[string]error
	exists, dp bool
	// pitr: point-in-time recovery is on; pitrAsked counts the requests
	// turning it on.
	pitr      bool
	pitrAsked int
	// warm is the table's warm throughput as DescribeTable reports it (nil:
	// none, as DynamoDB Local); created and updates are the requests.
	warm    *types.TableWarmThroughputDescription
	created *dynamodb.CreateTableInput
	updates []*dynamodb.UpdateTableInput
}

var _ API = (*fakeDB)(nil)

func (f *fakeDB) DescribeTable(_ context.Context, in *dynamodb.DescribeTableInput, _ ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error) {
	if !f.exists {
		return nil, &types.ResourceNotFoundException{Message: aws.String("no table")}
	}
	return &dynamodb.DescribeTableOutput{Table: &types.TableDescription{TableName: in.TableName, TableStatus: types.TableStatusActive,
		TableArn: aws.String("arn:aws:dynamodb:us-east-1:1:table/" + aws.ToString(in.TableName)), DeletionProtectionEnabled: aws.Bool(f.dp),
		WarmThroughput: f.warm}}, nil
}

func (f *fakeDB) CreateTable(_ context.Context, in *dynamodb.CreateTableInput, _ ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error) {
	if err := f.errs["CreateTable"]; err != nil {
		return nil, err
	}
	f.exists, f.dp, f.created = true, aws.ToBool(in.DeletionProtectionEnabled), in
	return &dynamodb.CreateTableOutput{}, nil
}

func (f *fakeDB) UpdateTable(_ context.Context, in *dynamodb.UpdateTableInput, _ ...func(*dynamodb.Options)) (*dynamodb.UpdateTableOutput, error) {
	f.updates = append(f.updates, in)
	if err := f.errs["UpdateTable"]; err != nil {
		return nil, err
	}
	if !f.exists {
		return nil, &types.ResourceNotFoundException{Message: aws.String("no table")}
	}
	if in.DeletionProtectionEnabled != nil {
		f.dp = *in.DeletionProtectionEnabled
	}
	return &dynamodb.UpdateTableOutput{}, nil
}

func (f *fakeDB) DescribeContinuousBackups(context.Context, *dynamodb.DescribeContinuousBackupsInput, ...func(*dynamodb.Options)) (*dynamodb.DescribeContinuousBackupsOutput, error) {
	if err := f.errs["DescribeContinuousBackups"]; err != nil {
		return nil, err
	}
	status := types.PointInTimeRecoveryStatusDisabled
	if f.pitr {
		status = types.PointInTimeRecoveryStatusEnabled
	}
	return &dynamodb.DescribeContinuousBackupsOutput{ContinuousBackupsDescription: &types.ContinuousBackupsDescription{
		PointInTimeRecoveryDescription: &types.PointInTimeRecoveryDescription{PointInTimeRecoveryStatus: status}}}, nil
}

func (f *fakeDB) UpdateContinuousBackups(_ context.Context, in *dynamodb.UpdateContinuousBackupsInput, _ ...func(*dynamodb.Options)) (*dynamodb.UpdateContinuousBackupsOutput, error) {
	if err := f.errs["UpdateContinuousBackups"]; err != nil {
		return nil, err
	}
	if s := in.PointInTimeRecoverySpecification; s != nil && aws.ToBool(s.PointInTimeRecoveryEnabled) {
		f.pitr = true
		f.pitrAsked++
	}
	return &dynamodb.UpdateContinuousBackupsOutput{}, nil
}

func (f *fakeDB) TagResource(context.Context, *dynamodb.TagResourceInput, ...func(*dynamodb.Options)) (*dynamodb.TagResourceOutput, error) {
	if err := f.errs["TagResource"]; err != nil {
		return nil, err
	}
	return &dynamodb.TagResourceOutput{}, nil
}

func apiErr(code string) error { return &smithy.GenericAPIError{Code: code, Message: "injected"} }

// Only DynamoDB Local's UnknownOperationException on the PITR and tagging
// calls is skipped, and only when Local; every other error surfaces.
func TestEnsureSkipsOnlyWhatTheLocalServerLacks(t *testing.T) {
	unknown := apiErr("UnknownOperationException")
	pitrNote := "local DynamoDB has no " + featurePITR + "; skipped"
	tagsNote := "local DynamoDB has no " + featureTags + "; skipped"
	tests := []struct {
		name      string
		local     bool
		exists    bool // the counter created the table (unprotected)
		errs      map[string]error
		wantCode  string // "" for success
		wantNotes []string
	}{
		{name: "AWS: nothing refused"},
		{name: "local: PITR and tags unknown, as DynamoDB Local answers", local: true,
			errs:      map[string]error{"DescribeContinuousBackups": unknown, "UpdateContinuousBackups": unknown, "TagResource": unknown},
			wantNotes: []string{pitrNote, tagsNote}},
		{name: "local: unknown PITR update after a describe that worked", local: true,
			errs: map[string]error{"UpdateContinuousBackups": unknown}, wantNotes: []string{pitrNote}},
		{name: "AWS: unknown operation surfaces", errs: map[string]error{"DescribeContinuousBackups": unknown}, wantCode: "UnknownOperationException"},
		{name: "local: throttled PITR describe surfaces", local: true,
			errs: map[string]error{"DescribeContinuousBackups": apiErr("ThrottlingException")}, wantCode: "ThrottlingException"},
		{name: "local: PITR update refused otherwise surfaces", local: true,
			errs: map[string]error{"UpdateContinuousBackups": apiErr("ValidationException")}, wantCode: "ValidationException"},
		{name: "local: tagging access denied surfaces", local: true,
			errs: map[string]error{"TagResource": apiErr("AccessDeniedException")}, wantCode: "AccessDeniedException"},
		{name: "local: create refused surfaces (no retry without protection)", local: true,
			errs: map[string]error{"CreateTable": apiErr("ValidationException")}, wantCode: "ValidationException"},
		{name: "local: deletion protection refused surfaces", local: true, exists: true,
			errs: map[string]error{"UpdateTable": unknown}, wantCode: "UnknownOperationException"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db := &fakeDB{errs: tt.errs, exists: tt.exists}
			tables := &Tables{DB: db, Local: tt.local}
			_, _, err := tables.Ensure(t.Context(), archive.Spec{Name: "ddbpipe-votes-2026-12", Tags: map[string]string{"app": "ddbpipe"}})
			if tt.wantCode == "" && err != nil {
				t.Fatalf("Ensure: %v, want success", err)
			}
			if tt.wantCode != "" {
				var ae smithy.APIError
				if !errors.As(err, &ae) || ae.ErrorCode() != tt.wantCode {
					t.Fatalf("Ensure: %v, want %s", err, tt.wantCode)
				}
			}
			if got := tables.Notes(); !reflect.DeepEqual(got, tt.wantNotes) {
				t.Errorf("notes %q, want %q", got, tt.wantNotes)
			}
		})
	}
}

// Where the server has PITR, every month's table gets it: a new table, and
// one the counter created without it; a table that has it is left alone.
// Deletion protection likewise.
func TestEnsureTurnsOnPITRAndProtection(t *testing.T) {
	tests := []struct {
		name             string
		exists, dp, pitr bool
		wantAsked        int
	}{
		{name: "new table", wantAsked: 1},
		{name: "the counter's table, unprotected, no PITR", exists: true, wantAsked: 1},
		{name: "protected, PITR on already", exists: true, dp: true, pitr: true, wantAsked: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db := &fakeDB{exists: tt.exists, dp: tt.dp, pitr: tt.pitr}
			tables := &Tables{DB: db}
			tb, _, err := tables.Ensure(t.Context(), archive.Spec{Name: "ddbpipe-votes-2026-12"})
			if err != nil {
				t.Fatal(err)
			}
			if !db.pitr || db.pitrAsked != tt.wantAsked {
				t.Errorf("PITR on %v after %d requests, want on after %d", db.pitr, db.pitrAsked, tt.wantAsked)
			}
			if !db.dp || !tb.DeletionProtection {
				t.Errorf("deletion protection %v (table says %v), want on", db.dp, tb.DeletionProtection)
			}
			if len(tables.Notes()) != 0 {
				t.Errorf("notes %q against a server with PITR", tables.Notes())
			}
		})
	}
}

// The warm throughput DynamoDB reports is the table's (UPDATING while a
// raise is under way); a table created with one above the default asks
// for it, and only for its figures above the default.
func TestWarmThroughputRequests(t *testing.T) {
	warm := &types.TableWarmThroughputDescription{ReadUnitsPerSecond: aws.Int64(12000), WriteUnitsPerSecond: aws.Int64(20000), Status: types.TableStatusUpdating}
	db := &fakeDB{warm: warm}
	tables := &Tables{DB: db}
	tb, created, err := tables.Ensure(t.Context(), archive.Spec{Name: "ddbpipe-votes-2026-12", Warm: &archive.Warm{Write: 20000}})
	if err != nil || !created {
		t.Fatalf("Ensure: %v created=%v", err, created)
	}
	if got := db.created.WarmThroughput; got == nil || got.ReadUnitsPerSecond != nil || aws.ToInt64(got.WriteUnitsPerSecond) != 20000 {
		t.Errorf("CreateTable's warm throughput %+v, want 20000 write units only", got)
	}
	if tb.Warm == nil || *tb.Warm != (archive.Warm{Read: 12000, Write: 20000}) || !tb.WarmUpdating {
		t.Errorf("table's warm throughput %v (updating %v), want 20000 writes/s, 12000 reads/s, updating", tb.Warm, tb.WarmUpdating)
	}
	if len(tables.Notes()) != 0 {
		t.Errorf("notes %q against a server with warm throughput", tables.Notes())
	}
	if in := CreateInput(archive.Spec{Name: "x"}); in.WarmThroughput != nil {
		t.Errorf("a table at the default asks for warm throughput %+v", in.WarmThroughput)
	}
}

// RaiseWarm asks exactly the figures given; only DynamoDB Local's "Nothing
// to update" (it ignores the warm throughput, the only change asked) is
// skipped, and only when Local.
func TestRaiseWarmSkipsOnlyWhatTheLocalServerLacks(t *testing.T) {
	nothing := &smithy.GenericAPIError{Code: "ValidationException", Message: "Nothing to update"}
	warmNote := "local DynamoDB has no " + featureWarm + "; skipped"
	tests := []struct {
		name       string
		local      bool
		missing    bool
		warm       archive.Warm
		err        error
		wantRaised bool
		wantErr    string // what the error says; "" for none
		wantNotes  []string
	}{
		{name: "AWS: writes raised", warm: archive.Warm{Write: 20000}, wantRaised: true},
		{name: "AWS: both raised", warm: archive.Warm{Read: 30000, Write: 20000}, wantRaised: true},
		{name: "local: nothing to update, as DynamoDB Local answers", local: true, warm: archive.Warm{Write: 20000}, err: nothing, wantNotes: []string{warmNote}},
		{name: "AWS: nothing to update surfaces", warm: archive.Warm{Write: 20000}, err: nothing, wantErr: "Nothing to update"},
		{name: "local: another validation surfaces", local: true, warm: archive.Warm{Write: 20000},
			err: &smithy.GenericAPIError{Code: "ValidationException", Message: "warm throughput lower than the table's"}, wantErr: "lower than the table's"},
		{name: "local: throttled surfaces", local: true, warm: archive.Warm{Write: 20000}, err: apiErr("LimitExceededException"), wantErr: "LimitExceededException"},
		{name: "a missing table", missing: true, warm: archive.Warm{Write: 20000}, wantErr: archive.ErrNotFound.Error()},
		{name: "nothing asked", warm: archive.Warm{}, wantErr: "nothing to raise"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db := &fakeDB{exists: !tt.missing, errs: map[string]error{"UpdateTable": tt.err}}
			tables := &Tables{DB: db, Local: tt.local}
			raised, err := tables.RaiseWarm(t.Context(), "ddbpipe-votes-2026-12", tt.warm)
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("RaiseWarm: %v, want error %q", err, tt.wantErr)
			}
			if raised != tt.wantRaised {
				t.Errorf("raised %v, want %v", raised, tt.wantRaised)
			}
			if tt.wantRaised {
				want := &dynamodb.UpdateTableInput{TableName: aws.String("ddbpipe-votes-2026-12"), WarmThroughput: warmInput(&tt.warm)}
				if len(db.updates) != 1 || !reflect.DeepEqual(db.updates[0], want) {
					t.Errorf("requests %+v, want only %+v", db.updates, want)
				}
				if w := db.updates[0].WarmThroughput; (w.ReadUnitsPerSecond != nil) != (tt.warm.Read > 0) || aws.ToInt64(w.WriteUnitsPerSecond) != tt.warm.Write {
					t.Errorf("warm throughput asked %+v, want %v (zero figures left out)", w, tt.warm)
				}
			}
			if got := tables.Notes(); !reflect.DeepEqual(got, tt.wantNotes) {
				t.Errorf("notes %q, want %q", got, tt.wantNotes)
			}
		})
	}
}
