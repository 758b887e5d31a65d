"""Two long multi-topic transcripts: a family's household assistant, a small shop's helper.

Topics share words on purpose ("appointment", "renewal", "quote", "start", "return",
"order", "shipping"), so that a question's words also occur in items that do not answer it.
"""

from __future__ import annotations

from .transcripts import Conversation


def household() -> Conversation:
    c = Conversation("household")
    c.user(
        "We're finally redoing the kitchen. I have two quotes, can you compare them? They're "
        "in my email."
    )
    c.call("search_email", {"query": "kitchen quote"})
    c.output(
        [
            {
                "from": "Brightline Renovations",
                "total_eur": 18400,
                "weeks": 5,
                "includes": "cabinets, worktop, tiling, electrics",
            },
            {
                "from": "Kowalski & Sons",
                "total_eur": 15900,
                "weeks": 6,
                "includes": "cabinets, worktop, tiling; electrics by a subcontractor",
            },
        ],
        ref="quotes",
    )
    c.assistant(
        "Brightline Renovations quotes 18,400 euros over five weeks, electrics included. "
        "Kowalski & Sons quotes 15,900 euros over six weeks, with the electrics done by a "
        "subcontractor. Kowalski is 2,500 euros cheaper for one extra week.",
        ref="quotes-compare",
    )
    c.user("Let's go with Kowalski. Tell them we accept, start date March 4.", ref="kowalski-q")
    c.call(
        "send_email",
        {
            "to": "Kowalski & Sons",
            "subject": "Kitchen - quote accepted",
            "body": "We accept your quote of 15,900 EUR. Start March 4.",
        },
    )
    c.output({"status": "sent"})
    c.assistant(
        "Sent: we accepted Kowalski & Sons' quote of 15,900 euros, with work starting March 4.",
        ref="kowalski",
    )
    c.user(
        "The car is due for its service, it's at 60,000 km. Can you book the Volvo at Nordic "
        "Motors?",
        ref="car-q",
    )
    c.call("book_service", {"garage": "Nordic Motors", "car": "Volvo V60", "service": "60k"})
    c.output(
        {
            "garage": "Nordic Motors",
            "date": "Feb 12",
            "time": "09:00",
            "work": "60,000 km service + swap to summer tyres later",
        }
    )
    c.assistant(
        "The Volvo V60's 60,000 km service is booked at Nordic Motors on February 12 at 09:00. "
        "They can swap to summer tyres at a later visit.",
        ref="car-service",
    )
    c.user(
        "Our car insurance renewal came in. Lumen wants 612 euros this year, that seems a lot.",
        ref="ins-q",
    )
    c.call("read_document", {"doc": "Lumen renewal notice"})
    c.output(
        "Lumen Insurance - policy LI-448201 - Volvo V60 - renewal premium 612.00 EUR "
        "(last year 519.00) - renews automatically on March 1 unless cancelled.",
        ref="ins-notice",
    )
    c.assistant(
        "Policy LI-448201 with Lumen renews automatically on March 1 at 612 euros, up from 519 "
        "last year. Want me to get comparison quotes?",
        ref="ins-summary",
    )
    c.user("Yes please, same cover.")
    c.call("compare_insurance", {"car": "Volvo V60", "cover": "comprehensive"})
    c.output([{"insurer": "Haven", "premium_eur": 540}, {"insurer": "Polar", "premium_eur": 575}])
    c.assistant(
        "Comparable comprehensive cover: Haven at 540 euros, Polar at 575. Haven saves you 72 "
        "euros against Lumen's renewal.",
        ref="ins-quotes",
    )
    c.user(
        "Switch us to Haven and cancel Lumen before it auto-renews.",
        ref="ins-switch-q",
    )
    c.call("switch_insurance", {"from_policy": "LI-448201", "to": "Haven", "start": "March 1"})
    c.output(
        {"new_policy": "HV-90233", "insurer": "Haven", "start": "March 1", "lumen_cancelled": True}
    )
    c.assistant(
        "Done: from March 1 the Volvo is insured with Haven (policy HV-90233, 540 euros a "
        "year), and the Lumen policy is cancelled so it won't auto-renew.",
        ref="ins-switched",
    )
    c.user("Emma's school wants to meet me. When's the parent-teacher meeting?", ref="ptm-q")
    c.call("read_email", {"from": "Riverside Primary", "subject": "parent-teacher"})
    c.output(
        "Dear parents, Emma's parent-teacher meeting with Mr. Duarte is on Thursday 20 "
        "February at 16:30 in room 12. Please also return the signed trip form.",
        ref="ptm-email",
    )
    c.assistant(
        "Emma's parent-teacher meeting is with Mr. Duarte on Thursday, February 20 at 16:30, "
        "room 12. They also want the signed trip form back.",
        ref="ptm",
    )
    c.user("What's the trip? How much do we pay?", ref="trip-q")
    c.call("read_email", {"from": "Riverside Primary", "subject": "science museum trip"})
    c.output(
        "Year 3 trip to the Science Museum on March 6. Cost 25 EUR per child, pay via the "
        "school app. Return the permission slip by February 27.",
        ref="trip-email",
    )
    c.assistant(
        "It's the Year 3 trip to the Science Museum on March 6: 25 euros per child through the "
        "school app, and the permission slip must be back by February 27.",
        ref="trip",
    )
    c.user("Also the school needs Emma's allergy form again. It's peanuts, same as last year.")
    c.call("fill_form", {"form": "medical-allergy", "child": "Emma", "allergy": "peanuts"})
    c.output({"status": "submitted"})
    c.assistant("Emma's allergy form (peanuts) is submitted to the school.", ref="allergy")
    c.user(
        "I need my prescription refilled before I run out on Friday.",
        ref="rx-q",
    )
    c.call("pharmacy_refill", {"patient": "me", "medication": "atorvastatin 20 mg"})
    c.output({"pharmacy": "Farmacia Central", "ready": "Thursday after 14:00", "repeats_left": 1})
    c.assistant(
        "Your atorvastatin 20 mg refill will be ready at Farmacia Central on Thursday after "
        "14:00. That's the last repeat: you'll need a new prescription from the GP next time.",
        ref="rx",
    )
    c.user("Leo needs a dental check-up too. Book him in.", ref="dentist-q")
    c.call("book_appointment", {"clinic": "Smile Dental", "patient": "Leo", "type": "check-up"})
    c.output({"clinic": "Smile Dental", "patient": "Leo", "date": "March 2", "time": "15:45"})
    c.assistant(
        "Leo's dental check-up and cleaning is booked at Smile Dental on March 2 at 15:45.",
        ref="dentist",
    )
    c.user(
        "Bad news from Kowalski, they're still finishing another job. They'll start a week "
        "later, March 11. Update the calendar.",
        ref="kitchen-delay-q",
    )
    c.call("update_calendar_event", {"event": "Kitchen renovation starts", "date": "March 11"})
    c.output({"status": "updated"})
    c.assistant(
        "Updated: the kitchen renovation with Kowalski & Sons now starts on March 11, a week "
        "later than planned; six weeks of work puts the end around April 22.",
        ref="kitchen-delay",
    )
    c.user(
        "Which tiles did we decide on for the floor? Kowalski needs to order them.",
        ref="tiles-q",
    )
    c.call("search_notes", {"query": "kitchen tiles"})
    c.output(
        "Kitchen floor: Terrazzo Grey 60x60 porcelain, 22 m2 + 10% spare. Splashback: white "
        "zellige, 3 m2.",
        ref="tiles-note",
    )
    c.assistant(
        "You chose Terrazzo Grey 60x60 porcelain for the floor (22 m² plus 10% spare) and white "
        "zellige for the splashback (3 m²).",
        ref="tiles",
    )
    c.user(
        "We're going to Crete in May. Does anyone's passport need renewing?",
        ref="passport-q",
    )
    c.call("read_documents", {"type": "passport", "family": True})
    c.output(
        [
            {"name": "Emma", "expires": "2029-08-02"},
            {"name": "Leo", "expires": "2025-04-18"},
            {"name": "me", "expires": "2031-01-10"},
        ],
        ref="passports",
    )
    c.assistant(
        "Leo's passport expires on April 18, before the Crete trip: it needs renewing now "
        "(allow six weeks). Emma's and yours are fine.",
        ref="passport",
    )
    c.user("Start Leo's passport renewal application then.")
    c.assistant(
        "I started Leo's online passport renewal; it needs a new photo and your signature as "
        "parent before it can be submitted.",
        ref="passport-started",
    )
    return c


def shop() -> Conversation:
    c = Conversation("shop")
    c.user(
        "Hi, I run Clay & Co, a small online ceramics shop. Can you check stock on the "
        "speckled mugs? I think they're selling fast.",
        ref="stock-q",
    )
    c.call("inventory", {"sku": "MUG-SPK-350"})
    c.output(
        {
            "sku": "MUG-SPK-350",
            "name": "Speckled Mug 350ml",
            "in_stock": 14,
            "sold_last_30d": 96,
            "supplier": "Kiln & Co",
        },
        ref="stock",
    )
    c.assistant(
        "Speckled Mug 350ml (MUG-SPK-350): 14 left, and 96 sold in the last 30 days, so about "
        "four days of stock. The speckled bowls are fine.",
        ref="stock-answer",
    )
    c.user("Order 200 more from Kiln & Co.", ref="reorder-q")
    c.call("purchase_order", {"supplier": "Kiln & Co", "sku": "MUG-SPK-350", "qty": 200})
    c.output({"po": "KC-3318", "supplier": "Kiln & Co", "eta": "Nov 14", "unit_cost_eur": 6.2})
    c.assistant(
        "Ordered 200 speckled mugs from Kiln & Co at 6.20 euros each (purchase order KC-3318), "
        "expected November 14.",
        ref="reorder",
    )
    c.user(
        "A customer says her order arrived smashed. Order 10482, Hannah Price. What can we do?",
        ref="broken-q",
    )
    c.call("get_order", {"order": 10482})
    c.output(
        {
            "order": 10482,
            "customer": "Hannah Price",
            "items": ["Serving Platter Sand"],
            "carrier": "DHL",
            "delivered": "Nov 2",
        }
    )
    c.assistant(
        "Order 10482 (Hannah Price) was one Serving Platter in Sand, delivered by DHL on "
        "November 2. Options: a refund, or a replacement with extra padding, plus a claim with "
        "DHL for the damage.",
        ref="broken-options",
    )
    c.user("Send her a replacement and file the DHL claim.")
    c.call(
        "create_order",
        {
            "customer": "Hannah Price",
            "items": ["Serving Platter Sand"],
            "price": 0,
            "note": "replacement for 10482, double box",
        },
    )
    c.output({"order": 10517, "status": "created"})
    c.assistant(
        "Replacement order 10517 is on its way to Hannah Price in a double box, free of "
        "charge, and I filed a damage claim with DHL for order 10482.",
        ref="broken-fix",
    )
    c.user(
        "Black Friday newsletter: 20% off everything. Give me a discount code and schedule it "
        "for Friday 7am.",
        ref="bf-q",
    )
    c.call("create_discount", {"code": "CLAY20", "percent": 20, "ends": "Nov 27"})
    c.output({"code": "CLAY20", "percent": 20})
    c.call("schedule_campaign", {"list": "newsletter", "send_at": "Fri 07:00", "code": "CLAY20"})
    c.output({"campaign": "black-friday", "recipients": 4210, "send_at": "Fri 07:00"})
    c.assistant(
        "The Black Friday newsletter goes to 4,210 subscribers on Friday at 07:00, with the "
        "code CLAY20 for 20% off everything until November 27.",
        ref="bf",
    )
    c.user(
        "Kiln & Co just emailed that my mugs are late. What's going on?",
        ref="supplier-q",
    )
    c.call("read_email", {"from": "Kiln & Co"})
    c.output(
        "Sorry - one of our two kilns broke down and the repair part takes ten days. Your "
        "order KC-3318 will now ship on November 28.",
        ref="supplier-email",
    )
    c.assistant(
        "Kiln & Co say one of their two kilns broke down and the repair part takes ten days, "
        "so purchase order KC-3318 now ships November 28 instead of November 14.",
        ref="supplier-delay",
    )
    c.user(
        "Ugh. And customers can't pay on the site since this morning, checkout shows an error!",
        ref="checkout-q",
    )
    c.call("payment_logs", {"since": "today 06:00"})
    c.output(
        "401 Unauthorized: API key expired (rk_live_...9f2) - 183 failed payment attempts "
        "since 06:12",
        ref="checkout-log",
    )
    c.assistant(
        "Checkout fails because the payment provider's restricted API key expired at 06:12: "
        "183 payment attempts were refused with 401. Create a new key in the dashboard and "
        "I'll put it in the shop settings.",
        ref="checkout-cause",
    )
    c.user("New key is rk_live_...a71, go.")
    c.call("update_settings", {"payment_api_key": "rk_live_...a71"})
    c.output({"status": "ok", "test_payment": "succeeded"})
    c.assistant(
        "The new key is in and a test payment went through: checkout works again after about "
        "two hours down.",
        ref="checkout-fixed",
    )
    c.user(
        "A chargeback came in for order 10391, says 'not received'. The tracking said delivered!",
        ref="cb-q",
    )
    c.call("get_order", {"order": 10391})
    c.output(
        {
            "order": 10391,
            "customer": "R. Okoro",
            "carrier": "DHL",
            "tracking": "delivered Oct 21, signed by R. OKORO",
            "amount_eur": 84,
        }
    )
    c.assistant(
        "Order 10391 (84 euros) was delivered on October 21 and signed for by R. Okoro. We "
        "can dispute the chargeback with the signed proof of delivery.",
        ref="cb-evidence",
    )
    c.user("Submit that evidence.")
    c.call("dispute_chargeback", {"order": 10391, "evidence": "DHL signed proof of delivery"})
    c.output({"dispute": "dp_4471", "status": "submitted", "decision_by": "Dec 15"})
    c.assistant(
        "Dispute submitted for order 10391 with DHL's signed proof of delivery; the bank "
        "decides by December 15.",
        ref="cb-submitted",
    )
    c.user("How did the Black Friday email do?", ref="bf-result-q")
    c.call("campaign_report", {"campaign": "black-friday"})
    c.output(
        {"opens": "41%", "clicks": "9.8%", "orders_with_code": 63, "revenue_eur": 3905},
        ref="bf-report",
    )
    c.assistant(
        "The Black Friday newsletter had a 41% open rate and 9.8% clicks; 63 orders used "
        "CLAY20, for 3,905 euros of revenue.",
        ref="bf-result",
    )
    c.user(
        "My accountant Marta asks about the Q3 VAT return. How much is due and when?",
        ref="vat-q",
    )
    c.call("accounting_report", {"report": "vat", "quarter": "Q3"})
    c.output(
        {
            "quarter": "Q3",
            "output_vat": 5120.4,
            "input_vat": 2806.1,
            "payable": 2314.3,
            "due": "Nov 7",
        },
        ref="vat-report",
    )
    c.assistant(
        "Q3 VAT: 5,120.40 euros collected minus 2,806.10 paid on purchases, so 2,314.30 euros "
        "to pay. The return and the payment are due November 7. I'll send Marta the report.",
        ref="vat",
    )
    c.user(
        "Shipping to the EU is eating my margin, DHL charges 6.90 per parcel. Any cheaper courier?",
        ref="ship-q",
    )
    c.call("compare_couriers", {"zone": "EU", "weight_kg": 1.5})
    c.output(
        [
            {"courier": "Parcelway", "price_eur": 5.4, "days": "3-5"},
            {"courier": "DHL", "price_eur": 6.9, "days": "2-4"},
        ]
    )
    c.assistant(
        "Parcelway charges 5.40 euros for a 1.5 kg parcel to the EU (3-5 days) against DHL's "
        "6.90 (2-4 days).",
        ref="ship-compare",
    )
    c.user("Switch EU shipping to Parcelway from Monday.", ref="ship-switch-q")
    c.call("update_shipping", {"zone": "EU", "courier": "Parcelway", "from": "Monday"})
    c.output({"zone": "EU", "courier": "Parcelway", "effective": "Monday"})
    c.assistant(
        "From Monday EU parcels go with Parcelway at 5.40 euros instead of DHL; the returns "
        "label in the order email is updated too.",
        ref="ship-switched",
    )
    c.user(
        "I need help packing orders before Christmas. Post a job for a part-timer, 15 hours "
        "a week.",
        ref="job-q",
    )
    c.call("post_job", {"title": "Part-time packer", "hours": 15, "pay_eur_hour": 14})
    c.output({"posting": "job_207", "applicants_so_far": 0})
    c.assistant(
        "Posted: part-time packer, 15 hours a week at 14 euros an hour (job_207).",
        ref="job",
    )
    c.user("Jonas applied and can start next week. Hire him.", ref="jonas-q")
    c.assistant(
        "Great: I sent Jonas the offer for the part-time packer role (15 h/week, 14 euros an "
        "hour), starting next week.",
        ref="jonas",
    )
    c.user("Did the bank decide on the chargeback yet?", ref="cb-result-q")
    c.call("chargeback_status", {"dispute": "dp_4471"})
    c.output({"dispute": "dp_4471", "status": "won", "amount_eur": 84})
    c.assistant(
        "Yes, we won the dispute for order 10391: the 84 euros stay with us.",
        ref="cb-won",
    )
    return c
