"""Articles for the semantic dedup tests: distinct news-style pages on unrelated subjects, near-duplicates
made from them by editing a few words (a syndicated copy with a changed date, a reworded sentence), and
the same distinct pages wrapped in one site's navigation and footer boilerplate."""
from __future__ import annotations

ARTICLES = {
    "bridge": (
        "The city council voted on Tuesday to close the Old Mill Bridge to heavy traffic after engineers found "
        "corrosion in three of its steel supports. The bridge, built in 1931, carries about twelve thousand "
        "vehicles a day across the river. Trucks over ten tonnes will be diverted to the northern bypass while "
        "repairs are planned. The council said the work could take two years and would cost roughly eight "
        "million dollars, most of it from a state infrastructure grant."),
    "coral": (
        "Marine biologists surveying the outer reef reported that nearly a third of the coral colonies they "
        "examined showed signs of bleaching after an unusually warm summer. Water temperatures stayed two "
        "degrees above the seasonal average for six weeks. The team photographed more than four hundred "
        "colonies along fixed transects and will return in autumn to see how many recover. Some species of "
        "branching coral were hit hardest, while massive boulder corals fared better."),
    "bakery": (
        "A family bakery that has sold rye bread on Harbor Street since 1958 will close its doors at the end of "
        "the month. The owners, a brother and sister who took over from their parents, said rising flour and "
        "energy prices made the ovens too expensive to run. Regular customers lined up on Saturday morning to "
        "buy the last loaves of caraway rye, and several brought old photographs of the shop to share with the "
        "staff."),
    "election": (
        "Turnout in the regional election reached sixty-four percent, the highest in two decades, according to "
        "preliminary figures from the electoral commission. Long queues formed at polling stations in the "
        "suburbs, where several sites stayed open an extra hour. Counting continued overnight, and officials "
        "expect final results by Thursday. Both main parties claimed the high turnout favoured them, and "
        "analysts pointed to a close race for the governor's seat."),
    "chess": (
        "The sixteen-year-old chess prodigy from the village school won the national junior championship "
        "after a tense final round that lasted nearly six hours. Playing black, she defended a difficult "
        "endgame with a rook against a rook and bishop until her opponent accepted a draw, which was enough to "
        "secure first place on tiebreaks. She will represent the country at the world youth championship in "
        "the autumn."),
    "vaccine": (
        "Health officials announced that a new vaccination campaign against measles will begin in primary "
        "schools next month. Nurses will visit every school in the district, and parents have been asked to "
        "return consent forms by Friday. Cases of measles rose last year after vaccination rates fell below "
        "the level needed to stop outbreaks. Officials said the vaccine is safe, free of charge and gives "
        "lasting protection after two doses."),
    "rover": (
        "The planetary rover drilled its twentieth rock sample on Monday from a layered outcrop at the edge of "
        "an ancient river delta. Mission scientists believe the fine-grained sediment formed in standing water "
        "billions of years ago and may preserve chemical traces of past environments. The sample tube was "
        "sealed and will be left at a depot for a future mission to collect and return to Earth."),
    "orchestra": (
        "The youth orchestra closed its summer season with a performance of Mahler's first symphony in the "
        "cathedral, drawing a standing ovation from a full house. Rehearsals began in June with more than "
        "ninety players aged fourteen to twenty-one. The conductor praised the brass section for the final "
        "movement and said the ensemble would tour three cities next year if funding allows."),
    "drought": (
        "Farmers in the eastern valley have begun selling cattle early because the drought has left pastures "
        "bare and hay prices have doubled since spring. Rainfall this year is less than half the long-term "
        "average, and two reservoirs have fallen below a quarter of capacity. The agriculture ministry has "
        "opened an emergency fund for feed and water carting, but growers say the money arrives too slowly."),
    "museum": (
        "The natural history museum reopened its dinosaur hall after a three-year renovation that replaced the "
        "old plaster casts with new skeletons mounted in more accurate poses. The centrepiece is a long-necked "
        "sauropod whose tail now sweeps above the visitors instead of dragging on the floor. Curators also "
        "added a room where children can watch preparators clean fossils behind a glass wall."),
    "cyber": (
        "A ransomware attack disrupted the hospital's appointment system for three days, forcing staff to "
        "return to paper records and postpone non-urgent operations. The hospital said no patient data appears "
        "to have been copied, but investigators are still examining the servers. Emergency care continued "
        "throughout. The attackers demanded payment in cryptocurrency, which the board refused to pay on the "
        "advice of the police."),
    "library": (
        "The public library will extend its opening hours on weekday evenings from next week, after a "
        "volunteer programme and a small budget increase made extra staffing possible. Students had "
        "petitioned for quiet study space during exam season, collecting more than two thousand signatures. "
        "The library will also lend laptops and portable internet hotspots to residents who do not have "
        "access at home."),
}

# (new id, source article, edits): a few words changed, the rest identical
EDITS = {
    "bridge-copy": ("bridge", [("on Tuesday", "on Wednesday"), ("about twelve thousand", "some 12,000")]),
    "coral-copy": ("coral", [("nearly a third", "almost one third"), ("in autumn", "in the autumn")]),
    "election-copy": ("election", [("sixty-four percent", "64 per cent"), ("by Thursday", "on Thursday"),
                                   ("Long queues", "Long lines")]),
    "rover-copy": ("rover", [("on Monday", "late on Monday"), ("twentieth", "20th")]),
    "cyber-copy": ("cyber", [("three days", "three full days"), ("board refused", "board declined")]),
}

NAV = ("Home | News | Sport | Business | Culture | Weather | Subscribe | Sign in. Latest headlines from the "
       "Riverside Gazette, your trusted local source since 1887. ")
FOOTER = (" Share this article on social media. Sign up for our morning newsletter to get the day's top stories "
          "in your inbox. Comments are moderated and may take up to a day to appear. Copyright Riverside Gazette "
          "Media Group. All rights reserved. Privacy policy | Terms of use | Contact us | Advertise with us.")


def edited(src: str, edits) -> str:
    text = ARTICLES[src]
    for a, b in edits:
        assert a in text, (src, a)
        text = text.replace(a, b, 1)
    return text


def corpus() -> tuple[list[dict], dict[str, str]]:
    """(rows, {removed id: kept id}): originals, near copies (after their original), boilerplate pages of
    six distinct articles (all kept), and an empty page."""
    rows = [{"id": k, "text": v} for k, v in ARTICLES.items()]
    rows += [{"id": f"site-{k}", "text": NAV + ARTICLES[k] + FOOTER}
             for k in ("chess", "vaccine", "orchestra", "drought", "museum", "library")]
    rows += [{"id": new, "text": edited(src, e)} for new, (src, e) in EDITS.items()]
    rows.insert(7, {"id": "empty", "text": ""})
    return rows, {new: src for new, (src, _) in EDITS.items()}
