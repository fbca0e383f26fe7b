"""The notebook layer: scale presets, the runs directory, the glue between notebook steps,
evaluation and the TF-IDF baseline, the live loss plot, a CJK font for plots, and notebook 05's own-data
glue and export.
"""
from nbkit._lazy import lazy_exports, names

__getattr__, __dir__ = lazy_exports(__name__, {
    **names('scale', 'Scale', 'get_scale', 'SCALES'),
    **names('runs', 'runs_dir', 'step_dir'),
    **names('params', 'resolve_scale', 'knob', 'overrides_of', 'run_tag'),
    **names('steps', 'tokenizer_dir', 'train_tokenizer', 'load_tokenizer', 'pretrained_model_dir', 'steps_for_epochs', 'write_json', 'predict', 'mlm_blocks', 'pretrain_config', 'first_and_last_eval', 'save_pretraining', 'finetune_config', 'save_sentiment_metrics', 'tokenizer_texts', 'pretrain_callbacks'),
    **names('evaluation', 'classification_report', 'format_report', 'compare_reports', 'plot_confusion_matrix'),
    **names('baseline', 'fit_tfidf_baseline', 'tfidf_baseline'),
    **names('plots', 'LivePlot'),
    **names('stats', 'mean_std', 'bootstrap_ci', 'bootstrap_diff', 'bootstrap_diff_seeds'),
    **names('corpus', 'pretraining_corpus', 'corpus_store', 'store_blocks', 'store_dir_for', 'store_summary'),
    **names('sizing', 'size_run', 'plan_text', 'scale_for_corpus'),
    **names('plateau', 'plateau_check', 'unigram_entropy', 'PlateauCheck'),
    **names('fonts', 'use_cjk_font', 'find_cjk_font', 'CJK_FAMILIES'),
    **names('owndata', 'pretraining_texts', 'train_tokenizer_on', 'export_classifier'),
    **names('tasks', 'load_task', 'training_mlm_corpus', 'truncate_like_tokenizer', 'baseline_at_cut', 'TASKS'),
    **names('second_task', 'load_news_task', 'finetune_task'),
})
