package mailbox_test

import (
	"bytes"
	"errors"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/agentenv/agentenv/examples/inbox/mailbox"
)

// The embedded mailbox.json is what the generator makes from the default
// seed (cmd/inbox-gen checks the files on disk the same way).
func TestCommittedIsGenerated(t *testing.T) {
	box, _, err := mailbox.Generate(mailbox.DefaultSeed)
	if err != nil {
		t.Fatal(err)
	}
	want, err := mailbox.Encode(box)
	if err != nil {
		t.Fatal(err)
	}
	got, err := mailbox.Committed()
	if err != nil {
		t.Fatal(err)
	}
	again, err := mailbox.Encode(*got)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again, want) {
		t.Fatal("the embedded mailbox.json is not Generate(DefaultSeed): run go generate ./mailbox and commit")
	}
}

func TestGenerateIsSeeded(t *testing.T) {
	encode := func(seed uint64) ([]byte, []byte) {
		box, family, err := mailbox.Generate(seed)
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		b, err := mailbox.Encode(box)
		if err != nil {
			t.Fatal(err)
		}
		s, err := mailbox.EncodeSeeds(family)
		if err != nil {
			t.Fatal(err)
		}
		return b, s
	}
	b1, s1 := encode(7)
	b2, s2 := encode(7)
	if !bytes.Equal(b1, b2) || !bytes.Equal(s1, s2) {
		t.Fatal("the same seed made two different mailboxes")
	}
	b3, s3 := encode(8)
	if bytes.Equal(b1, b3) || bytes.Equal(s1, s3) {
		t.Fatal("seeds 7 and 8 made the same mailbox")
	}
}

// Every seed makes a mailbox the family's questions can be answered on:
// one email per vendor and month, holding the number and the amount its
// patterns accept, and ids m-1... in date order.
func TestFamilyMatchesMailbox(t *testing.T) {
	for seed := range uint64(20) {
		box, family, err := mailbox.Generate(seed)
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		if len(family) != 30 || len(box.Emails) != 30+12+mailbox.Fillers {
			t.Fatalf("seed %d: %d tasks, %d emails", seed, len(family), len(box.Emails))
		}
		for i, e := range box.Emails {
			if e.ID != "m-"+strconv.Itoa(i+1) || (i > 0 && e.Date < box.Emails[i-1].Date) {
				t.Fatalf("seed %d: email %d is %s at %s", seed, i, e.ID, e.Date)
			}
		}
		numbers := map[string]bool{}
		for _, task := range family {
			if numbers[task.Number] {
				t.Fatalf("seed %d: invoice number %s twice", seed, task.Number)
			}
			numbers[task.Number] = true
			hits, total, err := box.Search(task.Vendor+" invoice "+task.Month, 10)
			if err != nil || total != 1 {
				t.Fatalf("seed %d, %s: %d hits, %v", seed, task.ID, total, err)
			}
			e, _ := box.Email(hits[0].ID)
			if !regexp.MustCompile(task.NumberPattern).MatchString(e.Subject) ||
				!strings.Contains(e.Body, "Amount due: $"+task.Amount+"\n") ||
				!regexp.MustCompile(task.AmountPattern).MatchString("$"+task.Amount) {
				t.Fatalf("seed %d, %s (%s, %s): email %+v", seed, task.ID, task.Number, task.Amount, e)
			}
		}
	}
}

func TestAmountPattern(t *testing.T) {
	cases := []struct {
		cents int
		yes   []string
		no    []string
	}{
		{128450, []string{"$1,284.50", "1284.50", "It is $ 1,284.50.", "1,284.50 USD"}, []string{"$11,284.50", "1,284.5", "1,284.500", "2,284.50", "$1.284,50"}},
		{6490, []string{"$64.90", "64.90", "refunded 64.90."}, []string{"164.90", "$64.9", "6,490.00"}},
		{123456789, []string{"$1,234,567.89", "1234567.89"}, []string{"1,234,567.8"}},
	}
	for _, c := range cases {
		re := regexp.MustCompile(mailbox.AmountPattern(c.cents))
		for _, s := range c.yes {
			if !re.MatchString(s) {
				t.Errorf("AmountPattern(%d) = %s does not match %q", c.cents, re, s)
			}
		}
		for _, s := range c.no {
			if re.MatchString(s) {
				t.Errorf("AmountPattern(%d) = %s matches %q", c.cents, re, s)
			}
		}
	}
}

func testBox() *mailbox.Mailbox {
	return &mailbox.Mailbox{Owner: "me@x.example", Emails: []mailbox.Email{
		{ID: "m-1", Folder: "archive", From: "billing@acme.example", To: "me@x.example", Date: "2025-01-01 09:00", Subject: "Invoice INV-1 for January", Body: "Amount due: $10.00"},
		{ID: "m-2", Folder: "inbox", From: "dana@x.example", To: "me@x.example", Date: "2025-02-01 09:00", Subject: "Lunch?", Body: "Noodles on Friday, Acme's canteen."},
		{ID: "m-3", Folder: "inbox", From: "billing@acme.example", To: "me@x.example", Date: "2025-03-01 09:00", Subject: "Invoice INV-2 for March", Body: "Amount due: $12.00"},
		{ID: "m-4", Folder: "spam", From: "win@prize.example", To: "me@x.example", Date: "2025-03-02 09:00", Subject: "You won", Body: "Claim now"},
	}}
}

func TestSearch(t *testing.T) {
	box := testBox()
	cases := []struct {
		query string
		limit int
		ids   []string
		total int
	}{
		{"invoice", 10, []string{"m-3", "m-1"}, 2},                 // newest first
		{"INVOICE acme", 10, []string{"m-3", "m-1"}, 2},            // case, every word
		{"invoice march", 10, []string{"m-3"}, 1},                  // subject words
		{"acme", 10, []string{"m-3", "m-2", "m-1"}, 3},             // sender and body
		{"Acme's canteen?", 10, []string{"m-2"}, 1},                // punctuation around words
		{"me@x.example", 1, []string{"m-4"}, 4},                    // recipient; the limit keeps the newest
		{"invoice noodles", 10, nil, 0},                            // no email holds both
		{"  \"won\"  ", 10, []string{"m-4"}, 1},                    // quotes
		{"$12.00", 10, []string{"m-3"}, 1},                         // symbols inside a word stay
		{"inv-1", 10, []string{"m-1"}, 1},                          // hyphens stay
		{"invoice invoice invoice", 10, []string{"m-3", "m-1"}, 2}, // repeats
	}
	for _, c := range cases {
		hits, total, err := box.Search(c.query, c.limit)
		if err != nil {
			t.Fatalf("Search(%q): %v", c.query, err)
		}
		var ids []string
		for _, h := range hits {
			ids = append(ids, h.ID)
		}
		if !slices.Equal(ids, c.ids) || total != c.total {
			t.Errorf("Search(%q, %d) = %v of %d, want %v of %d", c.query, c.limit, ids, total, c.ids, c.total)
		}
	}
	for _, q := range []string{"", "   ", "?!", `""`} {
		if _, _, err := box.Search(q, 10); !errors.Is(err, mailbox.ErrEmptyQuery) {
			t.Errorf("Search(%q): %v, want ErrEmptyQuery", q, err)
		}
	}
}

func TestEmailAndFolders(t *testing.T) {
	box := testBox()
	e, ok := box.Email("m-3")
	if !ok || e.Subject != "Invoice INV-2 for March" {
		t.Fatalf("Email(m-3) = %+v, %v", e, ok)
	}
	want := "ID: m-3\nFolder: inbox\nFrom: billing@acme.example\nTo: me@x.example\nDate: 2025-03-01 09:00\nSubject: Invoice INV-2 for March\n\nAmount due: $12.00"
	if e.Text() != want {
		t.Fatalf("Text() =\n%s\nwant\n%s", e.Text(), want)
	}
	for _, id := range []string{"m-9", "", "M-3", "3"} {
		if _, ok := box.Email(id); ok {
			t.Errorf("Email(%q) found one", id)
		}
	}
	got := box.FolderCounts()
	wantCounts := []mailbox.FolderCount{{Folder: "inbox", Emails: 2}, {Folder: "archive", Emails: 1}, {Folder: "sent", Emails: 0}, {Folder: "spam", Emails: 1}}
	if !slices.Equal(got, wantCounts) {
		t.Fatalf("FolderCounts() = %v, want %v", got, wantCounts)
	}
}
