// Package mailbox holds the inbox example's synthetic mailbox: its emails,
// the searches the env answers, and the seeded generator that made the
// committed mailbox.json.
//
// Nothing here is real mail: every address is under .example, and every
// name, number and date comes from Generate.
package mailbox

//go:generate go run ../cmd/inbox-gen

import (
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Email is one message of the mailbox.
type Email struct {
	ID      string `json:"id"`
	Folder  string `json:"folder"`
	From    string `json:"from"`
	To      string `json:"to"`
	Date    string `json:"date"` // "2025-10-02 09:14", UTC
	Subject string `json:"subject"`
	Body    string `json:"body"`
}

// Mailbox is one person's mail, oldest first.
type Mailbox struct {
	Owner  string  `json:"owner"`
	Emails []Email `json:"emails"`
}

// Folders, in the order list_folders gives them.
var Folders = []string{"inbox", "archive", "sent", "spam"}

//go:embed mailbox.json
var committed []byte

// Committed is the mailbox in mailbox.json, the one the env serves.
func Committed() (*Mailbox, error) {
	var m Mailbox
	if err := json.Unmarshal(committed, &m); err != nil {
		return nil, fmt.Errorf("reading the embedded mailbox.json: %w", err)
	}
	return &m, nil
}

// Hit is one search result: an email without its body.
type Hit struct {
	ID      string `json:"id"`
	Folder  string `json:"folder"`
	From    string `json:"from"`
	Date    string `json:"date"`
	Subject string `json:"subject"`
}

// ErrEmptyQuery is Search's answer to a query with no words.
var ErrEmptyQuery = errors.New("the query has no words: give one or more words to look for, e.g. invoice acme")

// Search finds the emails holding every word of query (case-insensitive,
// anywhere in the sender, recipient, subject or body), newest first. It
// returns at most limit hits and how many emails matched in all.
func (m *Mailbox) Search(query string, limit int) ([]Hit, int, error) {
	words := Words(query)
	if len(words) == 0 {
		return nil, 0, ErrEmptyQuery
	}
	var hits []Hit
	for i := len(m.Emails) - 1; i >= 0; i-- {
		e := &m.Emails[i]
		text := strings.ToLower(e.From + "\n" + e.To + "\n" + e.Subject + "\n" + e.Body)
		if !allIn(words, text) {
			continue
		}
		hits = append(hits, Hit{ID: e.ID, Folder: e.Folder, From: e.From, Date: e.Date, Subject: e.Subject})
	}
	total := len(hits)
	if len(hits) > limit {
		hits = hits[:limit]
	}
	return hits, total, nil
}

// Words splits a query into lower-case words, dropping the punctuation a
// model puts around them ("acme's", "invoice?").
func Words(query string) []string {
	var words []string
	for _, w := range strings.Fields(strings.ToLower(query)) {
		w = strings.TrimSuffix(strings.Trim(w, `"'.,;:!?()[]{}`), "'s")
		if w != "" {
			words = append(words, w)
		}
	}
	return words
}

func allIn(words []string, text string) bool {
	for _, w := range words {
		if !strings.Contains(text, w) {
			return false
		}
	}
	return true
}

// Email returns the email with id, if there is one.
func (m *Mailbox) Email(id string) (Email, bool) {
	i := slices.IndexFunc(m.Emails, func(e Email) bool { return e.ID == id })
	if i < 0 {
		return Email{}, false
	}
	return m.Emails[i], true
}

// FolderCount is one folder and how many emails it holds.
type FolderCount struct {
	Folder string `json:"folder"`
	Emails int    `json:"emails"`
}

// FolderCounts counts the emails of every folder, empty ones included.
func (m *Mailbox) FolderCounts() []FolderCount {
	counts := make([]FolderCount, len(Folders))
	for i, f := range Folders {
		counts[i].Folder = f
	}
	for _, e := range m.Emails {
		if i := slices.Index(Folders, e.Folder); i >= 0 {
			counts[i].Emails++
		}
	}
	return counts
}

// Text renders an email as read_email shows it: headers, a blank line,
// the body.
func (e Email) Text() string {
	return fmt.Sprintf("ID: %s\nFolder: %s\nFrom: %s\nTo: %s\nDate: %s\nSubject: %s\n\n%s",
		e.ID, e.Folder, e.From, e.To, e.Date, e.Subject, e.Body)
}
