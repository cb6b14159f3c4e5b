package tasks_test

import (
	"bytes"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/agentic-opd/agenticopd/tasks"
)

// benchRows is a dataset of 10 000 rows with a 1 KiB statement and 2 KiB of tests each.
const benchRows = 10000

func BenchmarkReadJSONL(b *testing.B) {
	var buf bytes.Buffer
	stmt := bytes.Repeat([]byte("s"), 1<<10)
	tests := bytes.Repeat([]byte("t"), 2<<10)
	for i := range benchRows {
		fmt.Fprintf(&buf, `{"id": %d, "prompt": "%s", "test_code": "%s", "difficulty": "easy"}`+"\n", i, stmt, tests)
	}
	data := buf.Bytes()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		ts, _, err := tasks.ReadJSONL(bytes.NewReader(data), "bench", tasks.LoadConfig{})
		if err != nil || len(ts) != benchRows {
			b.Fatal(len(ts), err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*benchRows), "ns/row")
}

func BenchmarkLoadParquet(b *testing.B) {
	rows := make([]simpleRow, benchRows)
	for i := range rows {
		rows[i] = simpleRow{Prompt: string(bytes.Repeat([]byte("s"), 1<<10)), TestCode: string(bytes.Repeat([]byte("t"), 2<<10))}
	}
	path := filepath.Join(b.TempDir(), "bench.parquet")
	if err := parquet.WriteFile(path, rows); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		ts, _, err := tasks.LoadParquet(path, tasks.LoadConfig{})
		if err != nil || len(ts) != benchRows {
			b.Fatal(len(ts), err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*benchRows), "ns/row")
}
