"""Source readers, one module per format (registered in pipeline.sources.base.READERS).

Per format (free text fields are whitespace-normalised: runs of whitespace,
newlines included, become one space, ends are stripped; VALSE records are kept
verbatim):

| format | one sample per | native id | dataset | dataset_idx | image_file | more fields |
|---|---|---|---|---|---|---|
| coco | caption annotation | annotation id | `coco2017` | annotation id (int) | image `file_name` | `caption`, `image_id`; `instance_category_ids` when `instances` is configured |
| visual7w | "how many" QA (`type` "how", question starting "how many", any case) | `qa_id` | `visual7w` | image id as a string | image `filename` | `question`, `answer`, `multiple_choices`, `qa_id`, `image_id`, `type` |
| swig | image | image name | `SWiG` | image name | image name | `verb`, `frames`, `nouns` ({noun id: [glosses]} for the ids in the frames), `verb_abstract`, `verb_order`, `bb`, `height`, `width` |
| visdial | dialog turn | `<image_id>:<turn>` | `VisDial_v1.0` | `image_id` (int) | `image_file_template.format(image_id=...)` | `caption`, `question`, `answer` (resolved from the index lists), `turn` (0-based), `image_id` |
| openimages | image with relationships | `ImageID` | `OpenImages_v6` | `ImageID` | `<ImageID>.jpg` | `relationships`: [{`subject`, `object`, `predicate`, `subject_name`, `object_name`, `subject_box`, `object_box`}], `boxes`: [{`label`, `name`, `box`}] |
| bd2bb | CSV row | row `id` | `BD2BB` | row `id` (int) | null (the CSV names no image) | `intention` (sent1), `sent2`, `endings` [5], `types` [5], `label` (int), `target` (= endings[label]) |
| valse | released record | `<file stem>:<key>` | as released | as released | as released | every released field, plus `valse_instrument` (file stem) and `valse_key` |
"""
