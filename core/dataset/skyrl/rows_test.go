package skyrl

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/parquet-go/parquet-go"
)

// A file of 2,500 rows has row groups of at most rowGroupRows rows, and
// reads back whole.
func TestParquetRowGroupsBounded(t *testing.T) {
	dir := t.TempDir()
	rows := make([]Row, 2500)
	for i := range rows {
		rows[i] = Row{Prompt: []Message{{"user", "task " + strconv.Itoa(i)}}, EnvClass: EnvClass,
			Episode: Episode{Split: "train", Index: int64(i), TaskID: "t/" + strconv.Itoa(i), Tools: []string{}}, DataSource: "x"}
	}
	tmp, err := writeParquet(dir, "train.parquet", rows, rowsKind)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(tmp)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, _ := f.Stat()
	pf, err := parquet.OpenFile(f, st.Size())
	if err != nil {
		t.Fatal(err)
	}
	var sizes []int64
	for _, rg := range pf.RowGroups() {
		sizes = append(sizes, rg.NumRows())
	}
	if len(sizes) != 3 || sizes[0] != rowGroupRows || sizes[2] != 2500-2*rowGroupRows {
		t.Fatalf("row groups %v", sizes)
	}
	back, err := ReadRows(tmp)
	if err != nil || len(back) != 2500 || back[2499].Episode.TaskID != "t/2499" || back[7].Prompt[0].Content != "task 7" {
		t.Fatalf("read back %d rows: %v", len(back), err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 || filepath.Join(dir, entries[0].Name()) != tmp {
		t.Fatalf("left %v", entries)
	}
}
