package mailbox

import (
	"fmt"
	"time"
)

var acme = vendor{"acme", "Acme Supplies", "billing@acme-supplies.example", "printing supplies"}

// storyEmails are the emails the hand-written eval tasks ask about
// (tasks/*.json other than invoice.json). They are fixed text: only their
// ids depend on the seed, through the emails sorted around them.
func storyEmails() []Email {
	const dana = "dana.okafor@northwind-studio.example"
	team := "team@northwind-studio.example"
	return []Email{
		// acme-invoice: an unpaid October invoice, and a paid September one
		// with its receipt.
		invoice{vendor: acme, number: 977, cents: 111820, issued: at("2025-09-02 08:40"), folder: "archive"}.email(),
		{Folder: "archive", From: acme.addr, To: Owner, Date: "2025-09-19 11:05",
			Subject: "Payment received for INV-0977",
			Body:    "Hello Sam,\n\nThank you: we received $1,118.20 for invoice INV-0977. Nothing more is due on it.\n\nAcme Supplies, Accounts"},
		invoice{vendor: acme, number: 1042, cents: 128450, issued: at("2025-10-02 09:14"), folder: "inbox"}.email(),

		// lisbon-trip: the outbound flight, its return, and the booking.
		{Folder: "inbox", From: "bookings@skyway-air.example", To: Owner, Date: "2025-10-21 19:47",
			Subject: "Booking confirmed: London to Lisbon, 11 December",
			Body: "Dear Sam Rivera,\n\nThank you for booking with Skyway Air. Your booking reference is K7QX2M.\n\n" +
				"Outbound: flight SW 1482, London Gatwick (LGW) 07:25 to Lisbon (LIS) 10:10, Thursday 11 December 2025, seat 14C\n" +
				"Return: flight SW 1487, Lisbon (LIS) 18:40 to London Gatwick (LGW) 21:20, Sunday 14 December 2025, seat 9A\n\n" +
				"Online check-in opens 24 hours before each flight.\n\nSkyway Air"},

		// offsite: the save-the-date, then a change of venue.
		{Folder: "inbox", From: dana, To: team, Date: "2025-10-08 16:02",
			Subject: "Team offsite: save the date",
			Body:    "Hi all,\n\nOur winter offsite will be on Thursday 4 December 2025 at the Harbor View Hotel. Keep the day free; the agenda follows.\n\nDana"},
		{Folder: "inbox", From: dana, To: team, Date: "2025-11-03 10:30",
			Subject: "Offsite: change of venue",
			Body:    "Hi all,\n\nSmall change: the Harbor View Hotel double-booked us, so the offsite moves to Alder Lodge, 12 Fern Road. Same date, Thursday 4 December, starting at 9:30.\n\nDana"},

		// refund: the order, then a refund of part of it.
		{Folder: "archive", From: "orders@paperleaf.example", To: Owner, Date: "2025-11-04 13:10",
			Subject: "Your Paperleaf order 58213",
			Body:    "Hello Sam,\n\nThank you for your order 58213: four A3 sketchbooks ($64.90) and shipping ($6.50). Total charged: $71.40 to your Visa card ending in 4417.\n\nPaperleaf"},
		{Folder: "inbox", From: "support@paperleaf.example", To: Owner, Date: "2025-11-12 14:22",
			Subject: "Refund issued for order 58213",
			Body:    "Hello Sam,\n\nWe're sorry the sketchbooks arrived damaged. We have refunded $64.90 to your Visa card ending in 4417; it should show within five business days. Shipping is not refunded.\n\nPaperleaf Support"},

		// spam: four, one of them posing as a bank.
		{Folder: "spam", From: "security@n0rthbank-verify.example", To: Owner, Date: "2025-11-14 02:13",
			Subject: "Urgent: your account has been suspended",
			Body:    "Dear customer,\n\nWe detected unusual activity on your NorthBank account. Verify your identity within 24 hours at http://n0rthbank-verify.example/login or your account will be closed.\n\nNorthBank Security"},
		{Folder: "spam", From: "prizes@lucky-draw.example", To: Owner, Date: "2025-09-27 23:51",
			Subject: "You have won a gift card!",
			Body:    "Congratulations! You were picked for a $500 gift card. Claim it today."},
		{Folder: "spam", From: "invest@coinrocket.example", To: Owner, Date: "2025-10-30 04:18",
			Subject: "Double your savings in 30 days",
			Body:    "Our members doubled their savings last month. Join now."},
		{Folder: "spam", From: "deals@cheap-meds.example", To: Owner, Date: "2025-11-18 05:40",
			Subject: "Exclusive offer just for you",
			Body:    "Limited time only: 90% off everything."},
	}
}

var (
	colleagues = []string{"alex.chen@northwind-studio.example", "jordan.lee@northwind-studio.example", "priya.nair@northwind-studio.example"}
	notes      = []struct{ subject, body string }{
		{"Lunch on Friday?", "Shall we try the new noodle place on Friday? Half past twelve works for me."},
		{"Brand guide v3 feedback", "I left comments on the colour section of the brand guide. Mostly small things."},
		{"Client call notes", "Notes from this morning's call are in the shared drive, under Clients."},
		{"Printer on the second floor", "The second-floor printer is working again. It needed a new drum."},
		{"Holiday rota", "Please add your days off to the holiday rota by the end of the month."},
		{"Font licences", "Do we still have seats left on the type foundry plan? I need one for the new hire."},
		{"Moodboard for the bakery", "First moodboard for the bakery rebrand is up. Warm colours, lots of texture."},
	}
	topics   = []string{"grids that breathe", "colour in small brands", "variable fonts", "designing for dark mode", "packaging that sells", "icon sets"}
	meetings = []string{"Design review", "Sprint planning", "Client workshop", "One-to-one", "Portfolio review"}
	carriers = []string{"Parcelio", "SwiftPost", "Northline"}
)

// filler is one everyday email at a random time, in one of five kinds.
func filler(r rng) Email {
	span := int(lastDay.Sub(firstMonth) / time.Minute)
	when := firstMonth.Add(time.Duration(r.intn(span)) * time.Minute)
	e := Email{Folder: "inbox", To: Owner, Date: stamp(when)}
	if when.Before(firstMonth.AddDate(0, 3, 0)) {
		e.Folder = "archive"
	}
	switch r.intn(5) {
	case 0:
		topic := pick(r, topics)
		e.From = "news@designweekly.example"
		e.Subject = fmt.Sprintf("Design Weekly #%d: %s", 80+int(when.Sub(firstMonth)/(7*24*time.Hour)), topic)
		e.Body = "This week: " + topic + ", three studios we like, and a reading list.\n\nUnsubscribe at any time."
	case 1:
		n := pick(r, notes)
		e.From = pick(r, colleagues)
		e.Subject, e.Body = n.subject, n.body
	case 2:
		m := pick(r, meetings)
		day := when.AddDate(0, 0, r.between(1, 6)).Format("Monday 2 January")
		e.From = "calendar@northwind-studio.example"
		e.Subject = fmt.Sprintf("Invitation: %s on %s", m, day)
		e.Body = fmt.Sprintf("%s, %s at %d:00, meeting room %s.", m, day, r.between(9, 16), pick(r, []string{"Oak", "Birch", "Cedar"}))
	case 3:
		order := r.between(30000, 57999)
		e.From = "orders@paperleaf.example"
		e.Subject = fmt.Sprintf("Your Paperleaf order %d has shipped", order)
		e.Body = fmt.Sprintf("Hello Sam,\n\nYour order %d is on its way with %s, tracking number %s%07d.\n\nPaperleaf",
			order, pick(r, carriers), pick(r, []string{"PC", "SW", "NL"}), r.intn(10000000))
	default:
		n := pick(r, notes)
		e.Folder = "sent"
		e.From, e.To = Owner, pick(r, colleagues)
		e.Subject = "Re: " + n.subject
		e.Body = "Thanks, sounds good. I'll take a look this afternoon.\n\nSam"
	}
	return e
}
