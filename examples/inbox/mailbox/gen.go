package mailbox

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// DefaultSeed is the seed of the committed mailbox.json and
// tasks/invoice.seeds.jsonl.
const DefaultSeed = 20251002

// Owner is whose mailbox it is.
const Owner = "sam@northwind-studio.example"

// Fillers is how many everyday emails (newsletters, colleagues, calendar,
// shipping, sent mail) Generate adds around the ones the tasks ask about.
const Fillers = 24

// InvoiceTask is one line of tasks/invoice.seeds.jsonl: a two-turn task
// asking for one vendor's invoice of one month, then the amount it asks.
type InvoiceTask struct {
	ID     string `json:"id"`
	Vendor string `json:"vendor"`
	Month  string `json:"month"`
	Number string `json:"number"`
	Amount string `json:"amount"`
	// The verifiers' patterns for the two answers.
	NumberPattern string `json:"number_pattern"`
	AmountPattern string `json:"amount_pattern"`
}

type vendor struct{ slug, name, addr, what string }

// The vendors whose invoices make the seeded family. Acme Supplies is not
// one of them: its invoices are the hand-written eval task's.
var vendors = []vendor{
	{"globex", "Globex Logistics", "billing@globex-logistics.example", "freight and courier services"},
	{"initech", "Initech Software", "accounts@initech.example", "design software licences"},
	{"umbrella", "Umbrella Cleaning", "invoices@umbrella-cleaning.example", "office cleaning"},
	{"stark", "Stark Office Furniture", "ar@stark-furniture.example", "the furniture lease"},
	{"wayne", "Wayne Telecom", "billing@waynetelecom.example", "phone and internet"},
	{"hooli", "Hooli Cloud", "billing@hooli-cloud.example", "cloud hosting"},
}

// The months the vendors bill, July to November 2025.
var (
	firstMonth = time.Date(2025, time.July, 1, 0, 0, 0, 0, time.UTC)
	months     = 5
	lastDay    = time.Date(2025, time.November, 20, 0, 0, 0, 0, time.UTC)
)

// The hand-written tasks' invoice numbers, kept out of the family's.
var storyInvoices = []int{977, 1042}

// rng draws from a PCG stream, whose output Go specifies, with reductions
// of its own so the bytes stay the same on every Go version.
type rng struct{ src *rand.PCG }

func (r rng) intn(n int) int { return int(r.src.Uint64() % uint64(n)) }

func (r rng) between(lo, hi int) int { return lo + r.intn(hi-lo+1) }

func pick[T any](r rng, xs []T) T { return xs[r.intn(len(xs))] }

// Generate makes the mailbox and the invoice family from seed.
func Generate(seed uint64) (Mailbox, []InvoiceTask, error) {
	r := rng{rand.NewPCG(seed, 0x1b0c5)}
	var emails []Email
	emails = append(emails, storyEmails()...)
	used := map[int]bool{}
	for _, n := range storyInvoices {
		used[n] = true
	}
	var family []InvoiceTask
	for _, v := range vendors {
		base := r.between(12000, 390000) // cents
		for m := range months {
			month := firstMonth.AddDate(0, m, 0)
			n := r.between(1000, 9999)
			for used[n] {
				n = r.between(1000, 9999)
			}
			used[n] = true
			cents := base * r.between(90, 110) / 100
			issued := month.Add(time.Duration(r.between(0, 4))*24*time.Hour + time.Duration(r.between(6*60, 10*60))*time.Minute)
			folder := "archive"
			if month.Month() >= time.October {
				folder = "inbox"
			}
			inv := invoice{vendor: v, number: n, cents: cents, issued: issued, folder: folder}
			emails = append(emails, inv.email())
			family = append(family, InvoiceTask{
				ID:            v.slug + "-" + strings.ToLower(month.Format("Jan")),
				Vendor:        v.name,
				Month:         month.Format("January"),
				Number:        inv.numberText(),
				Amount:        dollars(cents),
				NumberPattern: `\b` + regexp.QuoteMeta(inv.numberText()) + `\b`,
				AmountPattern: AmountPattern(cents),
			})
		}
	}
	for range Fillers {
		emails = append(emails, filler(r))
	}
	slices.SortStableFunc(emails, func(a, b Email) int { return strings.Compare(a.Date, b.Date) })
	for i := range emails {
		emails[i].ID = "m-" + strconv.Itoa(i+1)
	}
	m := Mailbox{Owner: Owner, Emails: emails}
	if err := m.check(); err != nil {
		return Mailbox{}, nil, fmt.Errorf("seed %d: %w", seed, err)
	}
	return m, family, nil
}

// check refuses a mailbox the tasks could not be answered on.
func (m *Mailbox) check() error {
	seen := map[string]bool{}
	for _, e := range m.Emails {
		if seen[e.Date+e.Subject] {
			return fmt.Errorf("two emails %q at %s", e.Subject, e.Date)
		}
		seen[e.Date+e.Subject] = true
		if !slices.Contains(Folders, e.Folder) {
			return fmt.Errorf("email %q is in folder %q, which is not one of %v", e.Subject, e.Folder, Folders)
		}
	}
	return nil
}

// dollars writes cents as 1,284.50.
func dollars(cents int) string {
	whole := strconv.Itoa(cents / 100)
	for i := len(whole) - 3; i > 0; i -= 3 {
		whole = whole[:i] + "," + whole[i:]
	}
	return fmt.Sprintf("%s.%02d", whole, cents%100)
}

// AmountPattern matches the amount cents written as 1,284.50 or 1284.50,
// with or without a dollar sign, and not inside a larger number.
func AmountPattern(cents int) string {
	whole := strconv.Itoa(cents / 100)
	var b strings.Builder
	for i, c := range whole {
		if i > 0 && (len(whole)-i)%3 == 0 {
			b.WriteString(",?")
		}
		b.WriteRune(c)
	}
	return fmt.Sprintf(`(?:^|[^\d.,])\$?\s?%s\.%02d\b`, b.String(), cents%100)
}

type invoice struct {
	vendor vendor
	number int
	cents  int
	issued time.Time
	folder string
}

func (in invoice) numberText() string { return fmt.Sprintf("INV-%04d", in.number) }

func (in invoice) email() Email {
	period := in.issued.Format("January 2006")
	body := fmt.Sprintf(`Hello Sam,

Here is invoice %[1]s from %[2]s for %[3]s in %[4]s.

Invoice: %[1]s
Period: %[4]s
Amount due: $%[5]s
Due date: %[6]s

Please pay by transfer to the account on file, quoting the invoice number.

%[2]s, Accounts`, in.numberText(), in.vendor.name, in.vendor.what, period, dollars(in.cents), in.issued.AddDate(0, 0, 30).Format("2006-01-02"))
	return Email{
		Folder:  in.folder,
		From:    in.vendor.addr,
		To:      Owner,
		Date:    stamp(in.issued),
		Subject: fmt.Sprintf("Invoice %s for %s", in.numberText(), in.issued.Format("January")),
		Body:    body,
	}
}

func stamp(t time.Time) string { return t.Format("2006-01-02 15:04") }

func at(s string) time.Time {
	t, err := time.Parse("2006-01-02 15:04", s)
	if err != nil {
		panic(err) // the story's dates are constants
	}
	return t
}

// Encode writes the mailbox as mailbox.json: indented, keys in struct
// order, a newline at the end.
func Encode(m Mailbox) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(m); err != nil {
		return nil, fmt.Errorf("encoding the mailbox: %w", err)
	}
	return b.Bytes(), nil
}

// EncodeSeeds writes the family as tasks/invoice.seeds.jsonl, one task a
// line.
func EncodeSeeds(family []InvoiceTask) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	for _, t := range family {
		if err := enc.Encode(t); err != nil {
			return nil, fmt.Errorf("encoding seed %s: %w", t.ID, err)
		}
	}
	return b.Bytes(), nil
}
