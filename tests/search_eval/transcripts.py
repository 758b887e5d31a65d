"""Six realistic transcripts, stored as the SDK stores them, with labels on the answers.

Each conversation is a list of SDK items (user messages, assistant `output_text` messages,
reasoning summaries, function calls with JSON arguments and their outputs). `ref=` labels an
item so that `queries.py` can name the items that answer a question.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Conversation:
    """A transcript being written: its items and the labels of some of them."""

    name: str
    items: list[dict[str, Any]] = field(default_factory=list)
    refs: dict[str, int] = field(default_factory=dict)
    _calls: int = 0

    def _add(self, item: dict[str, Any], ref: str | None) -> None:
        if ref is not None:
            assert ref not in self.refs, ref
            self.refs[ref] = len(self.items)
        self.items.append(item)

    def user(self, text: str, ref: str | None = None) -> None:
        self._add({"role": "user", "content": text}, ref)

    def user_parts(self, parts: list[dict[str, Any]], ref: str | None = None) -> None:
        self._add({"role": "user", "content": parts}, ref)

    def assistant(self, text: str, ref: str | None = None) -> None:
        n = len(self.items)
        self._add(
            {
                "id": f"msg_{self.name}_{n}",
                "type": "message",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": text, "annotations": []}],
            },
            ref,
        )

    def reasoning(self, summary: str, ref: str | None = None) -> None:
        n = len(self.items)
        self._add(
            {
                "type": "reasoning",
                "id": f"rs_{self.name}_{n}",
                "summary": [{"type": "summary_text", "text": summary}],
                "encrypted_content": "gAAAAABn-opaque==",
            },
            ref,
        )

    def call(self, name: str, arguments: dict[str, Any], ref: str | None = None) -> None:
        self._calls += 1
        self._add(
            {
                "type": "function_call",
                "id": f"fc_{self.name}_{self._calls}",
                "call_id": f"call_{self.name}_{self._calls}",
                "name": name,
                "arguments": json.dumps(arguments),
                "status": "completed",
            },
            ref,
        )

    def output(self, result: Any, ref: str | None = None) -> None:
        text = result if isinstance(result, str) else json.dumps(result, ensure_ascii=False)
        self._add(
            {
                "type": "function_call_output",
                "call_id": f"call_{self.name}_{self._calls}",
                "output": text,
            },
            ref,
        )

    def output_parts(self, texts: list[str], ref: str | None = None) -> None:
        self._add(
            {
                "type": "function_call_output",
                "call_id": f"call_{self.name}_{self._calls}",
                "output": [{"type": "input_text", "text": t} for t in texts],
            },
            ref,
        )


def incident() -> Conversation:
    c = Conversation("incident")
    c.user(
        "Hey, the deploy of checkout-api to production just went red in the pipeline. "
        "Can you take a look? Build #8812."
    )
    c.reasoning("User reports a failed production deploy of checkout-api; fetch the run logs.")
    c.call("get_pipeline_run", {"pipeline": "checkout-api", "run": 8812})
    c.output(
        {
            "status": "failed",
            "stage": "publish-artifacts",
            "runner": "ci-runner-07",
            "error": "ERR-4411: write /var/lib/docker/overlay2: no space left on device",
            "started": "2024-05-02T09:14:03Z",
        },
        ref="err-output",
    )
    c.assistant(
        "Run #8812 failed in the publish-artifacts stage on ci-runner-07 with ERR-4411: the "
        'Docker overlay directory ran out of space ("no space left on device"). In short, the '
        "deployment failed because the runner's disk was full.",
        ref="diagnosis",
    )
    c.user("Ugh. Is that the same runner that gave us trouble last month with the DNS timeouts?")
    c.call("search_incidents", {"query": "ci-runner-07", "limit": 3})
    c.output(
        [
            {
                "id": "INC-2291",
                "title": "DNS resolution timeouts on ci-runner-07",
                "resolved": "2024-04-11",
                "fix": "switched resolver to 10.0.0.2",
            }
        ],
        ref="inc-dns",
    )
    c.assistant(
        "Yes - INC-2291 last month was ci-runner-07 too, but that was DNS resolution timeouts, "
        "fixed by switching its resolver to 10.0.0.2. Today's failure is unrelated: it's disk "
        "space.",
        ref="dns-answer",
    )
    c.user("OK, free up some space on it and retry the deploy.")
    c.call("run_command", {"host": "ci-runner-07", "command": "docker system prune -af --volumes"})
    c.output(
        "Deleted Images: 143\nDeleted build cache objects: 2,311\nTotal reclaimed space: 61.4GB",
        ref="prune",
    )
    c.call("retry_pipeline", {"pipeline": "checkout-api", "run": 8812})
    c.output(
        {"new_run": 8815, "status": "succeeded", "version": "v2.3.1", "duration_s": 412},
        ref="retry-ok",
    )
    c.assistant(
        "Pruned Docker on ci-runner-07 and reclaimed 61.4 GB. I retried the pipeline as run "
        "#8815, and checkout-api v2.3.1 is now live in production (took about 7 minutes).",
        ref="live",
    )
    c.user(
        "Great. What's the rollback plan if v2.3.1 misbehaves? The previous version was v2.2.9 "
        "right?",
        ref="rollback-q",
    )
    c.assistant(
        "Right, the previous release was v2.2.9. To roll back, run `deployctl rollback "
        "checkout-api --to v2.2.9`; it switches traffic in about 30 seconds and keeps the "
        "database migrations, since 2.3.1 only added a nullable column.",
        ref="rollback",
    )
    c.user(
        "Can we make sure this disk thing doesn't happen again? Add an alert when runners go "
        "above 85% disk.",
        ref="alert-q",
    )
    c.call(
        "create_alert",
        {
            "name": "ci-runner-disk-usage",
            "expr": "disk_used_percent{job='ci-runners'} > 85",
            "for": "10m",
            "notify": "#infra-oncall",
        },
    )
    c.output({"alert_id": "ALRT-903", "state": "active"}, ref="alert")
    c.assistant(
        "Done: alert ALRT-903 fires when any CI runner stays above 85% disk usage for 10 "
        "minutes and notifies #infra-oncall.",
        ref="alert-confirm",
    )
    c.user("And put a weekly cron on the runners to prune docker, Sundays at 3am.", ref="cron-q")
    c.call(
        "run_command",
        {
            "host": "ci-runner-*",
            "command": "echo '0 3 * * 0 root docker system prune -af' > /etc/cron.d/docker-prune",
        },
    )
    c.output("ok (7 hosts)")
    c.assistant(
        "Added a cron job on all 7 runners that prunes Docker every Sunday at 03:00.", ref="cron"
    )
    c.user("Who was on call when it broke? I want to thank them for the quick page.")
    c.call("get_oncall", {"team": "infra", "at": "2024-05-02T09:14:03Z"})
    c.output({"primary": "Dana Whitfield", "secondary": "Marco Bellini"}, ref="oncall")
    c.assistant(
        "Dana Whitfield was the primary on-call when the deploy failed, with Marco Bellini as "
        "secondary.",
        ref="oncall-answer",
    )
    c.user("Write a two-line summary for the postmortem doc.")
    c.assistant(
        "Postmortem: checkout-api run #8812 failed at publish-artifacts because ci-runner-07's "
        "disk filled up (ERR-4411). Mitigated by pruning Docker and redeploying v2.3.1 (run "
        "#8815); prevention: ALRT-903 at 85% disk and a weekly prune cron.",
        ref="postmortem",
    )
    return c


def personal() -> Conversation:
    c = Conversation("personal")
    c.user(
        "Hi! Quick intro so you can help me: I'm Alex, I live at 12 Elm Street in Portland, and "
        "I have a shiba inu called Mochi.",
        ref="intro",
    )
    c.assistant(
        "Nice to meet you, Alex! Noted: you live at 12 Elm Street, Portland, and Mochi is your "
        "shiba inu.",
        ref="intro-ack",
    )
    c.user("Mochi needs her yearly vaccines. Can you book the vet?")
    c.call("find_vets", {"near": "12 Elm Street, Portland", "open": "weekday mornings"})
    c.output(
        [
            {
                "name": "Rose City Animal Clinic",
                "vet": "Dr. Amara Okafor",
                "phone": "503-555-0182",
                "next_slot": "2024-03-12T09:30",
            },
            {
                "name": "Pearl District Pet Care",
                "vet": "Dr. Ben Hale",
                "next_slot": "2024-03-15T11:00",
            },
        ]
    )
    c.call(
        "book_appointment",
        {
            "clinic": "Rose City Animal Clinic",
            "slot": "2024-03-12T09:30",
            "pet": "Mochi",
            "reason": "annual vaccines",
        },
    )
    c.output({"confirmation": "RCAC-77120", "status": "booked"}, ref="vet-booking")
    c.assistant(
        "Booked: Mochi sees Dr. Amara Okafor at Rose City Animal Clinic on Tuesday 12 March at "
        "9:30 for her annual vaccines (confirmation RCAC-77120).",
        ref="vet-confirm",
    )
    c.user(
        "Also please remember I'm allergic to peanuts, so never suggest restaurants with satay "
        "or peanut sauces without warning me.",
        ref="allergy",
    )
    c.assistant(
        "Understood - peanut allergy noted. I'll flag any dish or restaurant that relies on "
        "peanuts.",
        ref="allergy-ack",
    )
    c.user(
        "My sister Lena's birthday is June 9. She's been talking about learning to make ceramics.",
        ref="lena",
    )
    c.assistant(
        "Lovely gift idea: a beginner wheel-throwing pottery class. I can look for one closer "
        "to June 9.",
        ref="gift",
    )
    c.user("Let's sort out lunch plans for friday: me and Sam, somewhere near the office, Indian.")
    c.call(
        "search_restaurants",
        {"cuisine": "indian", "near": "office", "day": "friday", "party_size": 2},
    )
    c.output(
        [
            {"name": "Tandoori Palace", "rating": 4.6, "notes": "no peanuts in kitchen"},
            {"name": "Curry Leaf", "rating": 4.4, "notes": "several dishes with peanut sauce"},
        ]
    )
    c.assistant(
        "For Friday lunch with Sam I'd pick Tandoori Palace (4.6 stars, and they don't use "
        "peanuts). Curry Leaf has several peanut-sauce dishes, so I'd skip it. Want me to "
        "reserve 12:30?",
        ref="lunch",
    )
    c.user("Yes 12:30 works.")
    c.call(
        "reserve_table",
        {"restaurant": "Tandoori Palace", "time": "12:30", "day": "friday", "party_size": 2},
    )
    c.output({"reservation": "TP-3391", "status": "confirmed"}, ref="lunch-res")
    c.assistant(
        "Reserved Tandoori Palace for two on Friday at 12:30 (reservation TP-3391).",
        ref="lunch-confirm",
    )
    c.user(
        "Big news: we moved! New address is 48 Harbor Lane, Seattle, WA 98101. Please update "
        "everything.",
        ref="move",
    )
    c.assistant(
        "Congratulations on the move! I've updated your address to 48 Harbor Lane, Seattle, WA "
        "98101.",
        ref="move-ack",
    )
    c.call("update_profile", {"field": "address", "value": "48 Harbor Lane, Seattle, WA 98101"})
    c.output({"ok": True})
    c.user("Mochi will need a new vet in Seattle too.")
    c.call("find_vets", {"near": "48 Harbor Lane, Seattle", "open": "saturdays"})
    c.output(
        [
            {
                "name": "Puget Paws Veterinary",
                "vet": "Dr. Sofia Lindqvist",
                "phone": "206-555-0147",
                "next_slot": "2024-07-06T10:00",
            }
        ],
        ref="seattle-vet",
    )
    c.assistant(
        "Puget Paws Veterinary near your new place has Dr. Sofia Lindqvist available on "
        "Saturday 6 July at 10:00. Shall I book it?",
        ref="seattle-vet-ack",
    )
    c.user("Not yet, I'll call them myself. What's their number?")
    c.assistant("Puget Paws Veterinary: 206-555-0147.", ref="seattle-vet-phone")
    c.user(
        "I've started going to the gym on Mondays and Thursdays at 7am, block those mornings in "
        "my calendar.",
        ref="gym-q",
    )
    c.call(
        "create_event",
        {
            "title": "Gym",
            "recurrence": "RRULE:FREQ=WEEKLY;BYDAY=MO,TH",
            "start": "07:00",
            "duration_min": 60,
        },
    )
    c.output({"event_id": "evt_5521", "status": "created"})
    c.assistant("Done - a recurring 'Gym' event on Mondays and Thursdays, 7:00-8:00.", ref="gym")
    return c


def travel() -> Conversation:
    c = Conversation("travel")
    c.user(
        "I want to fly from San Francisco to Tokyo around October 14, economy, one adult. Aisle "
        "seat if possible."
    )
    c.call(
        "search_flights",
        {
            "origin": "SFO",
            "destination": "NRT",
            "date": "2024-10-14",
            "cabin": "economy",
            "adults": 1,
        },
    )
    c.output(
        [
            {"flight": "JL001", "depart": "2024-10-14T11:35", "price_usd": 1180},
            {"flight": "UA837", "depart": "2024-10-14T13:05", "price_usd": 1045},
            {"flight": "NH7", "depart": "2024-10-14T17:10", "price_usd": 1210},
        ],
        ref="flight-options",
    )
    c.assistant(
        "Three options on Oct 14: United UA837 is cheapest at $1,045 (13:05 departure), JAL "
        "JL001 is $1,180 (11:35), and ANA NH7 is $1,210 (17:10). Which do you prefer?",
        ref="flight-summary",
    )
    c.user("JAL please, I prefer their legroom.")
    c.call(
        "book_flight",
        {
            "flight": "JL001",
            "date": "2024-10-14",
            "seat_preference": "aisle",
            "passenger": "Alex Moreno",
        },
    )
    c.output(
        {"pnr": "QX7Z2L", "seat": "34C", "status": "ticketed", "total_usd": 1180},
        ref="flight-booking",
    )
    c.assistant(
        "Booked JL001 on 14 October, seat 34C (aisle). Your booking reference is QX7Z2L, total "
        "$1,180.",
        ref="flight-confirm",
    )
    c.user(
        "Now a hotel in Kyoto for Oct 17-21, something traditional, a ryokan with private "
        "onsen would be amazing."
    )
    c.call(
        "search_hotels",
        {
            "city": "Kyoto",
            "checkin": "2024-10-17",
            "checkout": "2024-10-21",
            "type": "ryokan",
            "amenities": ["private onsen"],
        },
    )
    c.output_parts(
        [
            "Hoshinoya Kyoto - $980/night - riverside, private onsen",
            "Ryokan Yamazaki - $340/night - private onsen, kaiseki dinner included",
        ]
    )
    c.assistant(
        "Ryokan Yamazaki fits best: private onsen and kaiseki dinner for $340/night. Hoshinoya "
        "Kyoto is gorgeous but $980/night. Book Yamazaki?",
        ref="ryokan-options",
    )
    c.user("Yamazaki. And note I'm vegetarian, tell them for the kaiseki dinners.", ref="veg")
    c.call(
        "book_hotel",
        {
            "hotel": "Ryokan Yamazaki",
            "checkin": "2024-10-17",
            "checkout": "2024-10-21",
            "special_requests": "vegetarian kaiseki",
        },
    )
    c.output(
        {"confirmation": "RY-20241017-88", "nights": 4, "total_usd": 1360}, ref="hotel-booking"
    )
    c.assistant(
        "Ryokan Yamazaki is booked for 4 nights, Oct 17-21 (confirmation RY-20241017-88, $1,360 "
        "total), and they've been told you're vegetarian for the kaiseki dinners.",
        ref="hotel-confirm",
    )
    c.user("How do I get from Tokyo to Kyoto on the 17th?")
    c.assistant(
        "Take the Tokaido Shinkansen from Tokyo Station: the Nozomi takes about 2h15m to Kyoto "
        "and costs around 14,000 yen. A 7-day JR Pass doesn't cover Nozomi, so buy "
        "point-to-point tickets unless you'll ride a lot.",
        ref="shinkansen",
    )
    c.user("Change of plans, my meeting moved - can you push the flight to October 16?")
    c.call("change_flight", {"pnr": "QX7Z2L", "new_date": "2024-10-16", "flight": "JL001"})
    c.output(
        {
            "pnr": "QX7Z2L",
            "new_departure": "2024-10-16T11:35",
            "change_fee_usd": 200,
            "seat": "31D",
        },
        ref="flight-change",
    )
    c.assistant(
        "Done: JL001 now departs 16 October at 11:35, seat 31D (aisle). The change fee was "
        "$200; your reference is still QX7Z2L.",
        ref="flight-change-confirm",
    )
    c.user("Since I now land on the 17th, will I still make the ryokan check-in?")
    c.assistant(
        "You land at Narita on 17 Oct at 15:20; with the Narita Express plus the Shinkansen "
        "you'd reach Kyoto around 20:30. Ryokan Yamazaki's check-in ends at 22:00, so it works, "
        "but you'd miss dinner that night.",
        ref="checkin",
    )
    c.user("what's the weather usually like in Kyoto in mid October?")
    c.call("get_climate", {"city": "Kyoto", "month": 10})
    c.output({"avg_high_c": 23, "avg_low_c": 13, "rain_days": 8})
    c.assistant(
        "Mid-October in Kyoto is mild: highs around 23 C, lows near 13 C, with rain on about 8 "
        "days in the month. Pack layers and a light rain jacket.",
        ref="weather",
    )
    return c


def support() -> Conversation:
    c = Conversation("support")
    c.user_parts(
        [
            {
                "type": "input_text",
                "text": "Hi, my order A-55821 arrived yesterday but the blender jar is cracked.",
            },
            {"type": "input_image", "image_url": "data:image/jpeg;base64,/9j/4AAQSkZJRg=="},
        ],
        ref="complaint",
    )
    c.call("lookup_order", {"order_id": "A-55821"})
    c.output(
        {
            "order_id": "A-55821",
            "customer": "user_42",
            "items": [{"sku": "BLX-900", "name": "ProBlend 900 blender", "price": 149.0}],
            "delivered": "2024-06-03",
            "carrier": "UPS",
            "tracking": "1Z999AA10123456784",
        },
        ref="order",
    )
    c.assistant(
        "Sorry about that! I can see order A-55821 - a ProBlend 900 blender delivered on 3 June "
        "by UPS. Would you like a replacement jar or a full refund?",
        ref="order-ack",
    )
    c.user("Honestly a refund, I'd rather buy a different model.")
    c.call(
        "create_return",
        {
            "order_id": "A-55821",
            "sku": "BLX-900",
            "reason": "damaged in transit: cracked jar",
            "resolution": "refund",
        },
        ref="return-call",
    )
    c.output(
        {
            "rma": "RMA-60217",
            "label_url": "https://returns.example.com/label/RMA-60217.pdf",
            "refund_amount": 149.0,
        },
        ref="rma",
    )
    c.assistant(
        "I've opened return RMA-60217. Print the prepaid label from the link I'm emailing you, "
        "drop the box at any UPS store, and $149.00 will be refunded to your original card "
        "within 5-7 business days after it's scanned.",
        ref="refund-info",
    )
    c.user(
        "My email on the account is old, it's still alex.m@oldmail.com. Can you change it to "
        "alex.moreno@fastmail.com?",
        ref="email-q",
    )
    c.call(
        "update_customer",
        {"customer_id": "user_42", "email": "alex.moreno@fastmail.com"},
        ref="email-call",
    )
    c.output(
        {"customer_id": "user_42", "email": "alex.moreno@fastmail.com", "verified": False},
        ref="email-change",
    )
    c.assistant(
        "Updated: the account user_42 now uses alex.moreno@fastmail.com. You'll get a "
        "verification link there; the return label goes to the new address once it's verified.",
        ref="email-ack",
    )
    c.user(
        "Which blender would you recommend instead? I mostly make smoothies with frozen fruit "
        "and sometimes nut butter."
    )
    c.call(
        "search_products",
        {"category": "blenders", "use_case": "frozen fruit, nut butter", "max_price": 250},
    )
    c.output(
        [
            {
                "sku": "VTX-E310",
                "name": "Vortex E310",
                "price": 229.0,
                "motor_w": 1400,
                "warranty_years": 7,
            },
            {"sku": "BLX-700", "name": "ProBlend 700", "price": 99.0, "motor_w": 900},
        ]
    )
    c.assistant(
        "For frozen fruit and nut butter I'd go with the Vortex E310 ($229): a 1400 W motor and "
        "a 7-year warranty. The ProBlend 700 ($99) struggles with thick nut butters.",
        ref="recommend",
    )
    c.user("Ok, order the Vortex E310 then, same shipping address.")
    c.call(
        "place_order",
        {"customer_id": "user_42", "sku": "VTX-E310", "quantity": 1, "ship_to": "default"},
        ref="order-call",
    )
    c.output({"order_id": "A-56104", "total": 229.0, "eta": "2024-06-10"}, ref="new-order")
    c.assistant(
        "Ordered! Your Vortex E310 is order A-56104, $229.00, arriving around 10 June.",
        ref="new-order-ack",
    )
    c.user("Where's my refund? It's been two weeks since UPS scanned the return.")
    c.call("get_refund_status", {"rma": "RMA-60217"}, ref="refund-call")
    c.output(
        {
            "rma": "RMA-60217",
            "status": "delayed",
            "reason": "warehouse inspection backlog",
            "expected": "2024-06-24",
        },
        ref="refund-status",
    )
    c.assistant(
        "Your refund for RMA-60217 is delayed by a backlog in warehouse inspections; it's now "
        "expected by 24 June. I've added a note to prioritise it and applied a $15 store credit "
        "for the wait.",
        ref="refund-delay",
    )
    c.user("thanks. what's the warranty on the new one again?")
    c.assistant(
        "The Vortex E310 comes with a 7-year warranty covering the motor base and jar.",
        ref="warranty",
    )
    return c


def coding() -> Conversation:
    c = Conversation("coding")
    c.user(
        "My Flask endpoint /api/orders throws KeyError: 'user_id' when I call it from the "
        "mobile app, but works from the web client.",
        ref="keyerror",
    )
    c.assistant(
        "The mobile app probably sends the id under a different key or as a query parameter. "
        "Use `request.get_json(silent=True) or {}` and `payload.get('user_id')`, and log the raw "
        "body to compare both clients.",
        ref="keyerror-advice",
    )
    c.user("You're right, the mobile client sends userId in camelCase. Fixed it.", ref="camel")
    c.user("Next: test_checkout_total is failing after I upgraded pydantic.", ref="test-q")
    c.call("run_tests", {"path": "tests/test_checkout.py", "keyword": "test_checkout_total"})
    c.output(
        "FAILED tests/test_checkout.py::test_checkout_total - AssertionError: assert "
        "Decimal('19.90') == 19.9\n1 failed, 12 passed in 0.84s",
        ref="test-fail",
    )
    c.reasoning(
        "The assertion compares a Decimal with a float; pydantic v2 keeps Decimal for "
        "condecimal fields instead of coercing to float.",
        ref="test-reasoning",
    )
    c.assistant(
        "Pydantic 2 no longer turns your `Decimal` price into a float, so `Decimal('19.90') == "
        "19.9` fails. Compare against `Decimal('19.90')` in the test or use `pytest.approx` "
        "after converting to float. Pinning `pydantic<2` would also work but I wouldn't.",
        ref="pydantic-fix",
    )
    c.user(
        "Fixed the test. Now the orders listing query is super slow on Postgres, like 4 seconds."
    )
    c.call(
        "explain_query",
        {"sql": "SELECT * FROM orders WHERE customer_id = $1 ORDER BY created_at DESC LIMIT 50"},
    )
    c.output(
        "Limit  (cost=0.00..48211.77 rows=50)\n"
        "  ->  Index Scan Backward using orders_created_at_idx on orders "
        "(actual time=3981.220 rows=50)\n"
        "        Filter: (customer_id = 4242)\n"
        "        Rows Removed by Filter: 2817340",
        ref="explain",
    )
    c.assistant(
        "Postgres walks the created_at index backwards and filters out 2.8 million rows to find "
        "50 for this customer. Add a composite index: `CREATE INDEX CONCURRENTLY "
        "orders_customer_created_idx ON orders (customer_id, created_at DESC);` and the query "
        "becomes an index range scan, typically a few milliseconds.",
        ref="index-fix",
    )
    c.user(
        "Added the index, now 3 ms. What Python version should the Dockerfile use? We're on 3.9."
    )
    c.assistant(
        "Move to python:3.12-slim: 3.9 reaches end of life in October 2025, and 3.12 is "
        "noticeably faster. Check that your dependencies have 3.12 wheels first "
        "(psycopg2-binary, numpy).",
        ref="python-version",
    )
    c.user("Also, how do I make the CI cache pip downloads? Using GitHub Actions.")
    c.assistant(
        "Use `actions/setup-python` with `cache: 'pip'` and point `cache-dependency-path` at "
        "requirements.txt; the cache key then changes whenever requirements change.",
        ref="ci-cache",
    )
    c.user("Last thing: the celery worker keeps getting OOM killed at night.", ref="oom")
    c.call("get_metrics", {"service": "celery-worker", "metric": "memory_rss_mb", "window": "24h"})
    c.output(
        {
            "max": 3890,
            "limit": 4096,
            "pattern": "grows steadily during nightly report job, never released",
        },
        ref="metrics",
    )
    c.assistant(
        "Memory climbs steadily during the nightly report job and is never released, so it's "
        "likely a leak in that task. Set `worker_max_tasks_per_child=50` (or "
        "`--max-memory-per-child=1500000`) so workers are recycled, and profile the report "
        "task with tracemalloc.",
        ref="oom-fix",
    )
    return c


def finance() -> Conversation:
    c = Conversation("finance")
    c.user("Prep me for Thursday's budget review. Pull the Q3 numbers from the finance sheet.")
    c.call("read_spreadsheet", {"file": "FY24 Budget.xlsx", "sheet": "Q3", "range": "A1:F20"})
    c.output(
        {
            "rows": [
                ["Line", "Budget", "Actual"],
                ["Revenue", "4,000,000", "4,210,000"],
                ["Cloud hosting", "310,000", "382,500"],
                ["Contractors", "250,000", "198,000"],
                ["Travel", "60,000", "41,300"],
            ]
        },
        ref="q3-sheet",
    )
    c.assistant(
        "Q3 summary: revenue $4.21M vs a $4.0M budget (+5%). Cloud hosting overran: $382.5k "
        "against $310k (+23%). Contractors came in under at $198k of $250k, travel at $41.3k of "
        "$60k.",
        ref="q3-summary",
    )
    c.user("Why is cloud so over?")
    c.call(
        "query_billing",
        {"provider": "aws", "period": "2024-Q3", "group_by": "service", "top": 3},
    )
    c.output(
        [
            {"service": "EC2", "cost": 171000},
            {
                "service": "S3 egress",
                "cost": 96400,
                "note": "spike in August from analytics export",
            },
            {"service": "RDS", "cost": 58100},
        ],
        ref="billing",
    )
    c.assistant(
        "Most of the overrun is S3 egress: $96.4k, spiking in August because of the analytics "
        "export job. EC2 ($171k) and RDS ($58.1k) are roughly on plan.",
        ref="cloud-why",
    )
    c.user("Who owns the analytics export?")
    c.assistant(
        "Per the service catalogue, the analytics export is owned by Priya Raman's data "
        "platform team.",
        ref="owner",
    )
    c.user("Set up a 30 min meeting with Priya on Wednesday morning to talk about egress costs.")
    c.call(
        "schedule_meeting",
        {
            "attendees": ["priya.raman@company.com"],
            "title": "S3 egress costs from analytics export",
            "day": "2024-10-09",
            "time": "10:00",
            "duration_min": 30,
        },
        ref="priya-call",
    )
    c.output({"event_id": "mtg_8841", "status": "accepted"}, ref="priya-mtg")
    c.assistant(
        "Meeting booked with Priya Raman on Wednesday 9 October, 10:00-10:30: 'S3 egress costs "
        "from analytics export'. She's accepted.",
        ref="priya-mtg-ack",
    )
    c.user("Also remind me: what did we agree with Acme Logistics on the contract renewal?")
    c.call("search_documents", {"query": "Acme Logistics renewal", "folder": "Contracts"})
    c.output(
        [
            {
                "title": "Acme Logistics MSA renewal notes",
                "excerpt": "Agreed 3-year renewal at 4% lower rate, net-45 payment terms, "
                "termination with 90 days notice. Signed by Tom Becker 2024-08-30.",
            }
        ],
        ref="acme",
    )
    c.assistant(
        "Acme Logistics: a 3-year renewal at a 4% lower rate, net-45 payment terms, and either "
        "side can terminate with 90 days' notice. Tom Becker signed it on 30 August.",
        ref="acme-ack",
    )
    c.user(
        "Update: finance sent revised Q3 numbers, revenue was restated to 4.05M after a late "
        "credit note.",
        ref="restated",
    )
    c.assistant(
        "Thanks - Q3 revenue is now $4.05M, only 1.25% above the $4.0M budget instead of 5%. "
        "I'll use the restated figure in the review notes.",
        ref="restated-ack",
    )
    c.user("Draft three bullet points for the review.")
    c.assistant(
        "- Revenue $4.05M (restated), +1.25% vs budget.\n"
        "- Cloud hosting +23% over, driven by S3 egress from the analytics export; meeting with "
        "Priya Raman on Oct 9 to fix it.\n"
        "- Contractors and travel under budget by $52k and $18.7k, offsetting part of the cloud "
        "overrun.",
        ref="bullets",
    )
    return c


def conversations() -> list[Conversation]:
    """All transcripts, in the order they were "recorded"."""
    return [incident(), personal(), travel(), support(), coding(), finance()]
